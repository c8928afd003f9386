//! Prints the schema (feature `schema`) so a reviewer can read it.

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
