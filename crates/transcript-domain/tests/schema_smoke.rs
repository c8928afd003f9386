//! Checks the envelope schema (feature `schema`): its seven required fields, the tool
//! payload's required fields and the six content block kinds.

#[test]
fn schema_describes_required_envelope_fields() {
    let schema = transcript_domain::schema::exchange_event_schema();
    let required = schema["required"].as_array().unwrap();
    assert_eq!(required.len(), 7);
    let defs = &schema["$defs"];
    assert_eq!(
        defs["ToolPayload"]["required"],
        serde_json::json!(["name", "call_id", "input", "output", "fidelity"])
    );
    assert!(defs["ContentBlock"]["oneOf"].as_array().unwrap().len() == 6);
}
