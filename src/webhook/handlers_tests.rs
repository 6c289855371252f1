//! In-process tests of the HTTPS routes against a fake policy.
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::conversion::{ConversionRequest, ConversionResponse};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{router, router_with_metrics};
use crate::webhook::metrics::{Endpoint, Outcome, WebhookMetrics};
use crate::webhook::{Policy, Readiness};

/// Denies objects named `deny-me`; mutation adds a label; conversion rewrites apiVersion.
pub(super) struct FakePolicy;

impl Policy for FakePolicy {
    fn validate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let response = AdmissionResponse::from(request);
        if request.name == "deny-me" {
            response.deny("metadata.name: \"deny-me\" is refused; pick another name")
        } else {
            response
        }
    }

    fn mutate(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}
        ]))
        .expect("static patch");
        AdmissionResponse::from(request)
            .with_patch(patch)
            .expect("patch serializes")
    }

    fn convert(&self, request: &ConversionRequest) -> ConversionResponse {
        let objects = request
            .objects
            .iter()
            .cloned()
            .map(|mut object| {
                if let Some(fields) = object.as_object_mut() {
                    fields.insert("apiVersion".to_owned(), json!(request.desired_api_version));
                }
                object
            })
            .collect();
        ConversionResponse::for_request(request.clone()).success(objects)
    }
}

struct PanickingPolicy;

impl Policy for PanickingPolicy {
    fn validate(&self, _: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        panic!("policy bug")
    }
    fn mutate(&self, _: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        panic!("policy bug")
    }
    fn convert(&self, _: &ConversionRequest) -> ConversionResponse {
        panic!("policy bug")
    }
}

fn ready_router() -> Router {
    let readiness = Readiness::new();
    readiness.set_ready(true);
    router(Arc::new(FakePolicy), readiness, 64 * 1024)
}

fn admission(name: &str) -> Value {
    admission_with_uid("3f2a-uid", name)
}

pub(super) fn admission_with_uid(uid: &str, name: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "kind": "Tunnel"},
            "resource": {"group": "networking.cfargotunnel.com", "version": "v1alpha2", "resource": "tunnels"},
            "name": name,
            "namespace": "apps",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "networking.cfargotunnel.com/v1alpha2", "kind": "Tunnel", "metadata": {"name": name}},
            "oldObject": null
        }
    })
}

fn conversion() -> Value {
    conversion_with_uid("conv-1")
}

pub(super) fn conversion_with_uid(uid: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": uid,
            "desiredAPIVersion": "networking.cfargotunnel.com/v1alpha2",
            "objects": [
                {"apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "Tunnel", "metadata": {"name": "a"}},
                {"apiVersion": "networking.cfargotunnel.com/v1alpha1", "kind": "Tunnel", "metadata": {"name": "b"}}
            ]
        }
    })
}

async fn post(app: &Router, path: &str, body: impl Into<Body>) -> (StatusCode, String, Value) {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .expect("request builds");
    let Ok(response) = app.clone().oneshot(request).await;
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = axum::body::to_bytes(response.into_body(), 16 << 20)
        .await
        .expect("body reads");
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, content_type, value)
}

fn json_body(value: &Value) -> Body {
    Body::from(serde_json::to_vec(value).expect("serializes"))
}

#[tokio::test]
async fn validate_reaches_the_policy_and_echoes_the_uid() {
    let app = ready_router();
    let (status, content_type, body) = post(&app, "/validate", json_body(&admission("edge"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    assert_eq!(body["response"]["uid"], "3f2a-uid");
    assert_eq!(body["response"]["allowed"], true);
}

#[tokio::test]
async fn a_denial_carries_the_policy_message_on_a_sub_path() {
    let app = ready_router();
    let (status, _, body) = post(&app, "/validate/tunnels", json_body(&admission("deny-me"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], false);
    assert_eq!(
        body["response"]["status"]["message"],
        "metadata.name: \"deny-me\" is refused; pick another name"
    );
}

#[tokio::test]
async fn mutate_returns_the_policy_patch() {
    let app = ready_router();
    let (status, _, body) = post(&app, "/mutate/deployments", json_body(&admission("edge"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["patchType"], "JSONPatch");
    // The API documents `patch` as base64 of the JSON patch.
    let expected = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        br#"[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]"#,
    );
    assert_eq!(body["response"]["patch"], Value::String(expected));
}

#[tokio::test]
async fn convert_round_trips_through_the_policy() {
    let app = ready_router();
    let (status, content_type, body) = post(&app, "/convert", json_body(&conversion())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    assert_eq!(body["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(body["kind"], "ConversionReview");
    assert_eq!(body["response"]["uid"], "conv-1");
    assert_eq!(body["response"]["result"]["status"], "Success");
    let converted = &body["response"]["convertedObjects"];
    assert_eq!(
        converted[0]["apiVersion"],
        "networking.cfargotunnel.com/v1alpha2"
    );
    assert_eq!(converted[1]["metadata"]["name"], "b");
}

#[tokio::test]
async fn malformed_bodies_get_400_with_a_message() {
    let app = ready_router();
    let mut wrong_kind = admission("edge");
    wrong_kind["kind"] = json!("Pod");
    let mut missing_request = admission("edge");
    missing_request.as_object_mut().map(|o| o.remove("request"));
    let cases: Vec<(&str, Body, &str)> = vec![
        (
            "/validate",
            Body::from("{not json"),
            "body is not valid JSON (key must be a string at line 1 column 2); expected kind AdmissionReview with apiVersion admission.k8s.io/v1",
        ),
        (
            "/mutate",
            Body::from("{\"hello\":1}"),
            "apiVersion: expected \"admission.k8s.io/v1\", got nothing; send kind AdmissionReview with apiVersion admission.k8s.io/v1",
        ),
        (
            "/validate",
            json_body(&wrong_kind),
            "kind: expected \"AdmissionReview\", got \"Pod\"; send kind AdmissionReview with apiVersion admission.k8s.io/v1",
        ),
        (
            "/validate",
            json_body(&missing_request),
            "request: missing; expected the AdmissionReview to carry the request to answer",
        ),
        (
            "/convert",
            json_body(&admission("edge")),
            "apiVersion: expected \"apiextensions.k8s.io/v1\", got \"admission.k8s.io/v1\"; send kind ConversionReview with apiVersion apiextensions.k8s.io/v1",
        ),
    ];
    for (path, body, message) in cases {
        let (status, content_type, answer) = post(&app, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {answer}");
        assert_eq!(content_type, "application/json");
        assert_eq!(answer["kind"], "Status");
        assert_eq!(answer["code"], 400);
        assert_eq!(answer["reason"], "BadRequest");
        assert_eq!(answer["message"], message);
    }
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413() {
    let metrics = Arc::new(WebhookMetrics::new());
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let app = router_with_metrics(Arc::new(FakePolicy), readiness, 1024, metrics.clone());
    let mut huge = admission("edge");
    huge["request"]["object"]["data"] = json!("x".repeat(4096));
    let (status, _, answer) = post(&app, "/validate", json_body(&huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        answer["message"],
        "request body is larger than the 1024 byte limit"
    );
    assert_eq!(metrics.requests(Endpoint::Validate, Outcome::TooLarge), 1);
}

#[tokio::test]
async fn conversion_is_served_before_ready() {
    // Listing stored objects of an older version needs conversion, so readiness cannot wait on it.
    let app = router(Arc::new(FakePolicy), Readiness::new(), 1 << 20);
    let (status, _, body) = post(&app, "/convert", json_body(&conversion())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["uid"], "conv-1");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_finishes_times_out_with_408() {
    let metrics = Arc::new(WebhookMetrics::new());
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let app = router_with_metrics(Arc::new(FakePolicy), readiness, 1 << 20, metrics.clone());
    let stalled = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
    let (status, _, answer) = post(&app, "/mutate", Body::from_stream(stalled)).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    assert_eq!(
        answer["message"],
        "the request took longer than 10 s; send the whole review promptly"
    );
    assert_eq!(metrics.requests(Endpoint::Mutate, Outcome::Timeout), 1);
}

#[tokio::test]
async fn answers_503_until_ready() {
    let readiness = Readiness::new();
    let metrics = Arc::new(WebhookMetrics::new());
    let app = router_with_metrics(
        Arc::new(FakePolicy),
        readiness.clone(),
        1 << 20,
        metrics.clone(),
    );
    let (status, _, answer) = post(&app, "/validate", json_body(&admission("edge"))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        answer["message"],
        "the cftunnel webhook is not ready: its caches have not synced yet; retry shortly"
    );
    readiness.set_ready(true);
    let (status, _, _) = post(&app, "/validate", json_body(&admission("edge"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(metrics.requests(Endpoint::Validate, Outcome::NotReady), 1);
    assert_eq!(metrics.requests(Endpoint::Validate, Outcome::Allowed), 1);
}

#[tokio::test]
async fn a_panicking_policy_gets_500_not_a_dropped_connection() {
    let readiness = Readiness::new();
    readiness.set_ready(true);
    let app = router(Arc::new(PanickingPolicy), readiness, 1 << 20);
    let (status, _, answer) = post(&app, "/validate", json_body(&admission("edge"))).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        answer["message"],
        "the policy failed while deciding this request; see the webhook logs"
    );
}

#[tokio::test]
async fn other_methods_and_paths_are_refused() {
    let app = ready_router();
    let get = Request::get("/validate")
        .body(Body::empty())
        .expect("request builds");
    let Ok(response) = app.clone().oneshot(get).await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let (status, _, _) = post(&app, "/elsewhere", json_body(&admission("edge"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The paths of the shipped webhook configurations (`manifests/webhooks.yaml`).
fn shipped_paths() -> Vec<String> {
    let text = include_str!("../../manifests/webhooks.yaml");
    let mut paths = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let config: Value = serde::Deserialize::deserialize(document).expect("webhooks YAML");
        for webhook in config["webhooks"].as_array().into_iter().flatten() {
            let path = &webhook["clientConfig"]["service"]["path"];
            paths.push(path.as_str().expect("a path").to_owned());
        }
    }
    paths
}

#[tokio::test]
async fn every_path_the_shipped_configurations_call_is_answered() {
    let paths = shipped_paths();
    for expected in ["/validate/networkroutes", "/validate/virtualnetworks"] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} in {paths:?}"
        );
    }
    let app = ready_router();
    for path in &paths {
        let (status, _, body) = post(&app, path, json_body(&admission("deny-me"))).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        if path.starts_with("/validate/") {
            assert_eq!(body["response"]["allowed"], false, "{path}: {body}");
        } else {
            assert!(body["response"]["patch"].is_string(), "{path}: {body}");
        }
    }
}
