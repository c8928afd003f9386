//! Which API an incoming request speaks and what it asks for: pure, from method, path and body.

use serde_json::Value;

use super::record::Provider;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// A model answer: consumes the next script turn.
    Generate {
        /// The API.
        provider: Provider,
        /// Whether the answer streams (SSE).
        stream: bool,
        /// Chat Completions: whether to stream the usage chunk.
        include_usage: bool,
        /// The model named by the request (echoed back).
        model: String,
    },
    /// Token counting (Anthropic `count_tokens`, Gemini `:countTokens`).
    CountTokens(Provider),
    /// Model listing (`GET .../models`).
    ListModels(Option<Provider>),
    /// Anything else: a 404 in the shape of the provider the path suggests.
    Unknown(Option<Provider>),
}

const DEFAULT_MODEL: &str = "testkit-model";

/// Decides the route of a request.
pub(crate) fn route(method: &str, path: &str, body: Option<&Value>) -> Route {
    let model_of = |b: Option<&Value>| {
        b.and_then(|b| b["model"].as_str())
            .unwrap_or(DEFAULT_MODEL)
            .to_owned()
    };
    let stream_of = |b: Option<&Value>| b.is_some_and(|b| b["stream"] == true);
    let path = path.trim_end_matches('/');
    if method == "GET" && (path.ends_with("/models") || path == "/models") {
        return Route::ListModels(guess(path));
    }
    if method != "POST" {
        return Route::Unknown(guess(path));
    }
    if let Some((model, verb)) = gemini_call(path) {
        return match verb {
            "streamGenerateContent" | "generateContent" => Route::Generate {
                provider: Provider::Gemini,
                stream: verb == "streamGenerateContent",
                include_usage: true,
                model: model.to_owned(),
            },
            "countTokens" => Route::CountTokens(Provider::Gemini),
            _ => Route::Unknown(Some(Provider::Gemini)),
        };
    }
    let provider = if path.ends_with("/messages/count_tokens") {
        return Route::CountTokens(Provider::Anthropic);
    } else if path.ends_with("/messages") {
        Provider::Anthropic
    } else if path.ends_with("/responses") {
        Provider::OpenAiResponses
    } else if path.ends_with("/chat/completions") {
        Provider::OpenAiChat
    } else {
        return Route::Unknown(guess(path));
    };
    Route::Generate {
        provider,
        stream: stream_of(body),
        include_usage: body.is_some_and(|b| b["stream_options"]["include_usage"] == true),
        model: model_of(body),
    }
}

/// `(model, verb)` of a Gemini path such as `/v1beta/models/gemini-2.5-pro:generateContent`.
fn gemini_call(path: &str) -> Option<(&str, &str)> {
    let rest = path.rsplit_once("/models/")?.1;
    let (model, verb) = rest.split_once(':')?;
    (!model.is_empty() && !model.contains('/')).then_some((model, verb))
}

/// The provider a path most likely belongs to, for the shape of an error body.
fn guess(path: &str) -> Option<Provider> {
    if path.starts_with("/v1beta") {
        Some(Provider::Gemini)
    } else if path.contains("/messages") {
        Some(Provider::Anthropic)
    } else if path.contains("/responses") {
        Some(Provider::OpenAiResponses)
    } else if path.contains("/chat") {
        Some(Provider::OpenAiChat)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_each_api() {
        let body =
            json!({"model": "m1", "stream": true, "stream_options": {"include_usage": true}});
        assert_eq!(
            route("POST", "/v1/messages", Some(&body)),
            Route::Generate {
                provider: Provider::Anthropic,
                stream: true,
                include_usage: true,
                model: "m1".into()
            }
        );
        assert!(matches!(
            route("POST", "/v1/responses", Some(&json!({}))),
            Route::Generate { provider: Provider::OpenAiResponses, stream: false, ref model, .. }
                if model == DEFAULT_MODEL
        ));
        assert!(matches!(
            route("POST", "/v1/chat/completions", None),
            Route::Generate {
                provider: Provider::OpenAiChat,
                include_usage: false,
                ..
            }
        ));
        assert_eq!(
            route(
                "POST",
                "/v1beta/models/gemini-x:streamGenerateContent",
                None
            ),
            Route::Generate {
                provider: Provider::Gemini,
                stream: true,
                include_usage: true,
                model: "gemini-x".into()
            }
        );
        assert!(matches!(
            route("POST", "/v1beta/models/gemini-x:generateContent", None),
            Route::Generate {
                provider: Provider::Gemini,
                stream: false,
                ..
            }
        ));
        assert_eq!(
            route("POST", "/v1beta/models/g:countTokens", None),
            Route::CountTokens(Provider::Gemini)
        );
        assert_eq!(
            route("POST", "/v1/messages/count_tokens", None),
            Route::CountTokens(Provider::Anthropic)
        );
        assert_eq!(route("GET", "/v1/models", None), Route::ListModels(None));
        assert_eq!(
            route("POST", "/api/event_logging/batch", None),
            Route::Unknown(None)
        );
        assert_eq!(
            route("GET", "/v1/messages", None),
            Route::Unknown(Some(Provider::Anthropic))
        );
    }
}
