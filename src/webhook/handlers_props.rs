//! Property tests: whatever body arrives, the router answers 400/413 with a message or a well-formed review.
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::router;
use super::tests::{FakePolicy, admission_with_uid, conversion_with_uid};
use crate::webhook::Readiness;

const PATHS: [&str; 6] = [
    "/validate",
    "/validate/tunnels",
    "/mutate",
    "/mutate/deployments",
    "/convert",
    "/convert/tunnels",
];
/// Small enough that fuzzed bodies reach it.
const FUZZ_BODY_LIMIT: usize = 4096;

fn fuzz_router() -> Router {
    let readiness = Readiness::new();
    readiness.set_ready(true);
    router(Arc::new(FakePolicy), readiness, FUZZ_BODY_LIMIT)
}

/// Posts one body and checks the invariant: 400/413 with a message, or a well-formed 200 review.
async fn check(app: &Router, path: &str, body: Vec<u8>) -> Result<StatusCode, TestCaseError> {
    let sent_uid = serde_json::from_slice::<Value>(&body).ok().and_then(|v| {
        v.pointer("/request/uid")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let too_big = body.len() > FUZZ_BODY_LIMIT;
    let request = Request::post(path)
        .body(Body::from(body))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let Ok(response) = app.clone().oneshot(request).await;
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 64 << 20)
        .await
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let answer: Value = serde_json::from_slice(&bytes)
        .map_err(|e| TestCaseError::fail(format!("{status}: answer is not JSON: {e}")))?;
    match status {
        StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE => {
            prop_assert_eq!(status == StatusCode::PAYLOAD_TOO_LARGE, too_big);
            prop_assert_eq!(&answer["kind"], "Status");
            prop_assert_eq!(&answer["code"], &json!(status.as_u16()));
            let message = answer["message"].as_str().unwrap_or_default();
            prop_assert!(message.len() > 10, "empty message: {}", answer);
        }
        StatusCode::OK => {
            prop_assert!(!too_big);
            let uid = answer.pointer("/response/uid").and_then(Value::as_str);
            prop_assert_eq!(uid, sent_uid.as_deref(), "uid not echoed: {}", answer);
            if path.starts_with("/convert") {
                prop_assert_eq!(&answer["apiVersion"], "apiextensions.k8s.io/v1");
                prop_assert_eq!(&answer["kind"], "ConversionReview");
                prop_assert!(
                    answer
                        .pointer("/response/convertedObjects")
                        .is_some_and(Value::is_array)
                );
            } else {
                prop_assert_eq!(&answer["apiVersion"], "admission.k8s.io/v1");
                prop_assert_eq!(&answer["kind"], "AdmissionReview");
                prop_assert!(
                    answer
                        .pointer("/response/allowed")
                        .is_some_and(Value::is_boolean)
                );
            }
        }
        other => prop_assert!(false, "unexpected status {} with {}", other, answer),
    }
    Ok(status)
}

/// Runs the invariant over `cases` inputs and returns how often each status was answered.
fn run_property<S: Strategy>(
    cases: u32,
    strategy: S,
    to_request: impl Fn(S::Value) -> (&'static str, Vec<u8>),
) -> BTreeMap<u16, u32> {
    let seen = RefCell::new(BTreeMap::new());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let app = fuzz_router();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |value| {
        let (path, body) = to_request(value);
        let status = runtime.block_on(check(&app, path, body))?;
        *seen.borrow_mut().entry(status.as_u16()).or_insert(0) += 1;
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    seen.into_inner()
}

fn any_path() -> impl Strategy<Value = &'static str> {
    prop::sample::select(PATHS.to_vec())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        prop::sample::select(vec![
            "admission.k8s.io/v1",
            "AdmissionReview",
            "ConversionReview",
            "apiextensions.k8s.io/v1",
            "CREATE"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "apiVersion",
                    "kind",
                    "request",
                    "uid",
                    "object",
                    "name",
                    "x"
                ]),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

/// JSON pointers into the valid reviews that mutations aim at.
const TARGETS: [&str; 22] = [
    "",
    "/apiVersion",
    "/kind",
    "/request",
    "/request/uid",
    "/request/kind",
    "/request/kind/kind",
    "/request/resource",
    "/request/name",
    "/request/namespace",
    "/request/operation",
    "/request/userInfo",
    "/request/userInfo/groups",
    "/request/object",
    "/request/object/metadata",
    "/request/object/metadata/labels",
    "/request/oldObject",
    "/request/dryRun",
    "/request/options",
    "/request/objects",
    "/request/objects/0",
    "/request/desiredAPIVersion",
];

#[derive(Debug, Clone)]
enum Mutation {
    Remove(&'static str),
    Replace(&'static str, Value),
}

fn apply(document: &mut Value, mutation: &Mutation) {
    let (target, replacement) = match mutation {
        Mutation::Remove(target) => (*target, None),
        Mutation::Replace(target, value) => (*target, Some(value.clone())),
    };
    let (parent, last) = target.rsplit_once('/').unwrap_or(("", ""));
    if target.is_empty() {
        *document = replacement.unwrap_or(Value::Null);
        return;
    }
    match (document.pointer_mut(parent), replacement) {
        (Some(Value::Object(fields)), Some(value)) => {
            fields.insert(last.to_owned(), value);
        }
        (Some(Value::Object(fields)), None) => {
            fields.remove(last);
        }
        (Some(Value::Array(items)), replacement) => {
            if let Ok(index) = last.parse::<usize>()
                && index < items.len()
            {
                match replacement {
                    Some(value) => items[index] = value,
                    None => {
                        items.remove(index);
                    }
                }
            }
        }
        _ => {}
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let target = prop::sample::select(TARGETS.to_vec());
    prop_oneof![
        target.clone().prop_map(Mutation::Remove),
        (target, json_value()).prop_map(|(t, v)| Mutation::Replace(t, v)),
    ]
}

#[test]
fn random_bytes_never_crash_the_router() {
    let seen = run_property(
        3500,
        (any_path(), prop::collection::vec(any::<u8>(), 0..6000)),
        |(path, body)| (path, body),
    );
    assert!(seen.get(&400).is_some_and(|n| *n > 0), "{seen:?}");
    assert!(seen.get(&413).is_some_and(|n| *n > 0), "{seen:?}");
}

#[test]
fn mutated_reviews_get_a_clear_answer() {
    let strategy = (
        any_path(),
        any::<bool>(),
        "[a-z0-9-]{0,40}",
        prop::collection::vec(mutation(), 0..4),
    );
    let seen = run_property(4000, strategy, |(path, as_conversion, uid, mutations)| {
        let mut document = if as_conversion {
            conversion_with_uid(&uid)
        } else {
            admission_with_uid(&uid, "edge")
        };
        for mutation in &mutations {
            apply(&mut document, mutation);
        }
        (path, serde_json::to_vec(&document).unwrap_or_default())
    });
    // Both intact and broken reviews were generated, for both review kinds.
    assert!(seen.get(&200).is_some_and(|n| *n > 0), "{seen:?}");
    assert!(seen.get(&400).is_some_and(|n| *n > 0), "{seen:?}");
}

#[test]
fn random_json_gets_a_clear_answer() {
    let seen = run_property(3000, (any_path(), json_value()), |(path, value)| {
        (path, serde_json::to_vec(&value).unwrap_or_default())
    });
    assert!(seen.get(&400).is_some_and(|n| *n > 0), "{seen:?}");
}
