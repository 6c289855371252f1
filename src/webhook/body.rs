//! Decoding of AdmissionReview and ConversionReview bodies, with messages that say what was expected.
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::core::admission::{self, AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::core::{DynamicObject, TypeMeta};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Longest quoted value echoed back in a message, so an answer never carries a large payload.
const MAX_QUOTED: usize = 64;

/// A body that is not the review this endpoint expects; the message is safe to return and log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadRequest {
    message: String,
}

impl BadRequest {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The readable reason.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The envelope each endpoint expects.
#[derive(Debug, Clone, Copy)]
struct Envelope {
    api_version: &'static str,
    kind: &'static str,
}

const ADMISSION: Envelope = Envelope {
    api_version: admission::META_API_VERSION_V1,
    kind: admission::META_KIND,
};

const CONVERSION: Envelope = Envelope {
    api_version: "apiextensions.k8s.io/v1",
    kind: "ConversionReview",
};

impl Envelope {
    fn type_meta(self) -> TypeMeta {
        TypeMeta {
            api_version: self.api_version.to_owned(),
            kind: self.kind.to_owned(),
        }
    }

    fn describe(self) -> String {
        format!("kind {} with apiVersion {}", self.kind, self.api_version)
    }

    /// Parses the body, checks apiVersion and kind, and returns the `request` member unparsed.
    ///
    /// The envelope is read without building a tree of the request: the request is then
    /// decoded once, straight from the body's bytes, into its final types.
    fn open(self, body: &[u8]) -> Result<&RawValue, BadRequest> {
        let not_json = |err: serde_json::Error| {
            BadRequest::new(format!(
                "body is not valid JSON ({err}); expected {}",
                self.describe()
            ))
        };
        if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            // Not an object: say what it is (reading it whole is bounded by the body limit).
            let value: Value = serde_json::from_slice(body).map_err(not_json)?;
            return Err(BadRequest::new(format!(
                "body is {}; expected a JSON object of {}",
                describe_value(&value),
                self.describe()
            )));
        }
        let envelope: RawEnvelope<'_> = serde_json::from_slice(body).map_err(not_json)?;
        for (field, expected, found) in [
            ("apiVersion", self.api_version, &envelope.api_version),
            ("kind", self.kind, &envelope.kind),
        ] {
            match found {
                Some(Value::String(found)) if found == expected => {}
                found => {
                    return Err(BadRequest::new(format!(
                        "{field}: expected \"{expected}\", got {}; send {}",
                        found
                            .as_ref()
                            .map_or_else(|| "nothing".to_owned(), describe_value),
                        self.describe()
                    )));
                }
            }
        }
        let request = envelope.request.ok_or_else(|| {
            BadRequest::new(format!(
                "request: missing; expected the {} to carry the request to answer",
                self.kind
            ))
        })?;
        match request.get().bytes().next() {
            Some(b'{') => Ok(request),
            _ => Err(BadRequest::new(format!(
                "request: expected an object, got {}",
                serde_json::from_str::<Value>(request.get())
                    .map_or_else(|_| "something else".to_owned(), |v| describe_value(&v))
            ))),
        }
    }
}

/// The review envelope; `request` stays a slice of the body until it is decoded into its type.
/// Unknown members (e.g. a `response`) are skipped without being stored; `null` reads as absent.
#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(rename = "apiVersion")]
    api_version: Option<Value>,
    kind: Option<Value>,
    #[serde(borrow)]
    request: Option<&'a RawValue>,
}

/// Names a JSON value for a message: its type, and a short quote for scalars.
fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("\"{}\"", truncate(s)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn truncate(s: &str) -> String {
    match s.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

/// The error without serde's " at line L column C": positions inside the request member would
/// not match the body the client sent.
fn without_position(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rfind(" at line ") {
        Some(cut) if err.line() > 0 => text[..cut].to_owned(),
        _ => text,
    }
}

/// Reads an `admission.k8s.io/v1` AdmissionReview body into its request.
pub fn decode_admission(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, BadRequest> {
    let request = ADMISSION.open(body)?;
    let mut request: AdmissionRequest<DynamicObject> = serde_json::from_str(request.get())
        .map_err(|err| {
            BadRequest::new(format!(
                "request: not a valid admission request: {}",
                without_position(&err)
            ))
        })?;
    request.types = ADMISSION.type_meta();
    Ok(request)
}

/// Reads an `apiextensions.k8s.io/v1` ConversionReview body into its request.
pub fn decode_conversion(body: &[u8]) -> Result<ConversionRequest, BadRequest> {
    let request = CONVERSION.open(body)?;
    let mut request: ConversionRequest = serde_json::from_str(request.get()).map_err(|err| {
        BadRequest::new(format!(
            "request: not a valid conversion request: {}",
            without_position(&err)
        ))
    })?;
    request.types = Some(CONVERSION.type_meta());
    Ok(request)
}

/// Wraps a policy answer in a v1 AdmissionReview, forcing the request's uid.
///
/// The patch goes out base64-encoded, as the API documents for `[]byte`.
pub(crate) fn admission_review(
    mut response: AdmissionResponse,
    uid: &str,
) -> Result<Value, serde_json::Error> {
    if response.uid != uid {
        tracing::warn!("policy answered with another uid; the request uid was restored");
        response.uid = uid.to_owned();
    }
    response.types = ADMISSION.type_meta();
    let patch = response.patch.take();
    let mut review = serde_json::to_value(AdmissionReview::<DynamicObject> {
        types: ADMISSION.type_meta(),
        request: None,
        response: Some(response),
    })?;
    if let (Some(patch), Some(answer)) = (
        patch,
        review.get_mut("response").and_then(Value::as_object_mut),
    ) {
        answer.insert("patch".to_owned(), Value::String(STANDARD.encode(patch)));
    }
    Ok(review)
}

/// Wraps a policy answer in a v1 ConversionReview, forcing the request's uid.
pub(crate) fn conversion_review(mut response: ConversionResponse, uid: &str) -> ConversionReview {
    if response.uid != uid {
        tracing::warn!("policy answered with another uid; the request uid was restored");
        response.uid = uid.to_owned();
    }
    response.types = None;
    ConversionReview {
        types: CONVERSION.type_meta(),
        request: None,
        response: Some(response),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn admission_body() -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "kind": "Tunnel"},
                "resource": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "resource": "tunnels"},
                "name": "edge",
                "namespace": "apps",
                "operation": "CREATE",
                "userInfo": {"username": "admin"},
                "object": {"apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel", "metadata": {"name": "edge"}},
                "oldObject": null,
                "dryRun": false
            }
        })
    }

    fn bytes(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap_or_default()
    }

    #[test]
    fn decodes_a_well_formed_admission_review() {
        let request = decode_admission(&bytes(&admission_body())).map_err(|e| e.to_string());
        let request = request.as_ref().map(|r| (r.uid.as_str(), r.name.as_str()));
        assert_eq!(
            request,
            Ok(("705ab4f5-6393-11e8-b7cc-42010a800002", "edge"))
        );
    }

    #[test]
    fn rejects_a_body_that_is_not_json() {
        let err = decode_admission(b"not json").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "body is not valid JSON (expected ident at line 1 column 2); expected kind AdmissionReview with apiVersion admission.k8s.io/v1"
            )
        );
    }

    #[test]
    fn rejects_a_json_array() {
        let err = decode_admission(b"[1]").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "body is an array; expected a JSON object of kind AdmissionReview with apiVersion admission.k8s.io/v1"
            )
        );
    }

    #[test]
    fn rejects_the_wrong_api_version_and_quotes_it() {
        let mut body = admission_body();
        body["apiVersion"] = json!("admission.k8s.io/v1beta1");
        let err = decode_admission(&bytes(&body)).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "apiVersion: expected \"admission.k8s.io/v1\", got \"admission.k8s.io/v1beta1\"; send kind AdmissionReview with apiVersion admission.k8s.io/v1"
            )
        );
    }

    #[test]
    fn rejects_a_conversion_review_on_an_admission_endpoint() {
        let mut body = admission_body();
        body["kind"] = json!("ConversionReview");
        let err = decode_admission(&bytes(&body)).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "kind: expected \"AdmissionReview\", got \"ConversionReview\"; send kind AdmissionReview with apiVersion admission.k8s.io/v1"
            )
        );
    }

    #[test]
    fn rejects_a_missing_request() {
        let mut body = admission_body();
        body.as_object_mut().map(|o| o.remove("request"));
        let err = decode_admission(&bytes(&body)).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("request: missing; expected the AdmissionReview to carry the request to answer")
        );
    }

    #[test]
    fn rejects_a_request_without_uid() {
        let mut body = admission_body();
        body["request"].as_object_mut().map(|o| o.remove("uid"));
        let err = decode_admission(&bytes(&body)).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("request: not a valid admission request: missing field `uid`")
        );
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let mut body = admission_body();
        body["kind"] = json!("x".repeat(1000));
        let message = decode_admission(&bytes(&body))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.contains(&format!("\"{}…\"", "x".repeat(64))),
            "{message}"
        );
        assert!(!message.contains(&"x".repeat(65)), "{message}");
    }

    #[test]
    fn decodes_a_conversion_review() {
        let body = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "c1", "desiredAPIVersion": "networking.cfargotunnel.com/v1alpha2", "objects": []}
        });
        let request = decode_conversion(&bytes(&body)).map_err(|e| e.to_string());
        let request = request
            .as_ref()
            .map(|r| (r.uid.as_str(), r.desired_api_version.as_str()));
        assert_eq!(request, Ok(("c1", "networking.cfargotunnel.com/v1alpha2")));
    }

    #[test]
    fn review_restores_the_request_uid() {
        let mut response = AdmissionResponse::invalid("x");
        response.uid = "other".to_owned();
        let review = admission_review(response, "right").unwrap_or_default();
        assert_eq!(review["response"]["uid"], "right");
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    }
}
