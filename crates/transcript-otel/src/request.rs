//! The OTLP request of a batch of spans: grouped by resource and scope under the exported
//! resource (`service.name` and the configured attributes).

use opentelemetry::KeyValue;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;

use crate::config::OtlpHttpConfig;

/// The resource of the exported spans: `service.name` and the configured attributes.
pub(crate) fn resource(config: &OtlpHttpConfig) -> Resource {
    resource_of(&config.service_name, &config.resource_attributes)
}

pub(crate) fn resource_of(service_name: &str, attributes: &[(String, String)]) -> Resource {
    Resource::builder_empty()
        .with_attributes(
            attributes
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(service_name.to_owned())
        .build()
}

fn service_resource(service_name: &str) -> Resource {
    Resource::builder_empty()
        .with_service_name(service_name.to_owned())
        .build()
}

/// The OTLP request for `spans` under a resource with `service_name`.
pub fn to_otlp_request(spans: Vec<SpanData>, service_name: &str) -> ExportTraceServiceRequest {
    to_otlp_request_for(spans, &service_resource(service_name))
}

/// The OTLP request for `spans` under `resource`.
pub(crate) fn to_otlp_request_for(
    spans: Vec<SpanData>,
    resource: &Resource,
) -> ExportTraceServiceRequest {
    let resource = ResourceAttributesWithSchema::from(resource);
    ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(spans, &resource),
    }
}
