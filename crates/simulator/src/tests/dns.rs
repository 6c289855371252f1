use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;

fn cname(name: &str, target: &str) -> Value {
    json!({ "type": "CNAME", "name": name, "content": target, "ttl": 1, "proxied": true })
}

#[tokio::test]
async fn create_returns_the_full_record_and_stores_comment_and_tags() {
    let sim = sim();
    let body = json!({
        "type": "CNAME", "name": "app.example.com", "content": "x.cfargotunnel.com",
        "ttl": 1, "proxied": true, "comment": "managed-by: cftunnel ns/app", "tags": ["owner:cftunnel"]
    });
    let answer = call(
        &sim,
        Method::POST,
        &records_path(&sim, "example.com"),
        Some(body),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let r = answer.result();
    assert_eq!(r["id"].as_str().map(str::len), Some(32));
    assert_eq!(
        r["zone_id"],
        sim.zone_id("example.com").expect("zone").as_str()
    );
    assert_eq!(r["zone_name"], "example.com");
    assert_eq!(
        (
            r["proxiable"].clone(),
            r["proxied"].clone(),
            r["ttl"].clone()
        ),
        (json!(true), json!(true), json!(1))
    );
    assert_eq!(
        (r["comment"].clone(), r["tags"].clone()),
        (
            json!("managed-by: cftunnel ns/app"),
            json!(["owner:cftunnel"])
        )
    );
    assert_eq!(
        (r["meta"].is_object(), r["settings"].clone()),
        (true, json!({}))
    );
    assert!(
        r["created_on"]
            .as_str()
            .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok())
    );
    assert_eq!(r["created_on"], r["modified_on"]);
    let txt = create_record(
        &sim,
        "example.com",
        json!({ "type": "TXT", "name": "t.example.com", "content": "\"x\"" }),
    )
    .await;
    let stored = sim.dns_records("example.com");
    assert_eq!(stored.len(), 2);
    assert_eq!(
        (
            stored[1].id.as_str(),
            stored[1].comment.as_deref(),
            stored[1].ttl,
            stored[1].proxied
        ),
        (txt.as_str(), None, 1, false)
    );
}

#[tokio::test]
async fn duplicate_cname_is_81053_and_identical_record_81058() {
    let sim = sim();
    let path = records_path(&sim, "example.com");
    create_record(
        &sim,
        "example.com",
        cname("app.example.com", "a.cfargotunnel.com"),
    )
    .await;
    let clash = call(
        &sim,
        Method::POST,
        &path,
        Some(cname("APP.example.com", "b.cfargotunnel.com")),
    )
    .await;
    assert_refused(
        &clash,
        StatusCode::BAD_REQUEST,
        81053,
        "An A, AAAA, or CNAME record with that host already exists.",
    );
    let same = call(
        &sim,
        Method::POST,
        &path,
        Some(cname("app.example.com", "a.cfargotunnel.com")),
    )
    .await;
    assert_eq!((same.status, same.code()), (StatusCode::BAD_REQUEST, 81058));
    let a = json!({ "type": "A", "name": "app.example.com", "content": "192.0.2.1" });
    assert_eq!(call(&sim, Method::POST, &path, Some(a)).await.code(), 81054);
    let txt = json!({ "type": "TXT", "name": "app.example.com", "content": "\"owner\"" });
    assert_eq!(
        call(&sim, Method::POST, &path, Some(txt)).await.status,
        StatusCode::OK
    );
    assert_eq!(sim.dns_records("example.com").len(), 2);
}

#[tokio::test]
async fn validation_errors_have_exact_codes() {
    let sim = sim();
    let path = records_path(&sim, "example.com");
    let cases = [
        (
            json!({ "type": "CNAME", "name": "a.example.com" }),
            1004,
            Some("missing required field `content`"),
        ),
        (
            json!({ "name": "a.example.com", "content": "x" }),
            1004,
            Some("missing required field `type`"),
        ),
        (
            json!({ "type": "A", "name": "a.example.com", "content": "not-an-ip" }),
            1004,
            Some("Content for A record must be a valid IPv4 address."),
        ),
        (
            json!({ "type": "TXT", "name": "a.example.com", "content": "x", "ttl": 5 }),
            9021,
            None,
        ),
        (
            json!({ "type": "TXT", "name": "a.example.com", "content": "x", "ttl": 86401 }),
            9021,
            None,
        ),
        (
            json!({ "type": "TXT", "name": "a.example.com", "content": "x", "proxied": true }),
            9004,
            None,
        ),
        (
            json!({ "type": "MX", "name": "a.example.com", "content": "mx.example.com" }),
            1004,
            Some("MX records require `priority`"),
        ),
        (
            json!({ "type": "SRV", "name": "a.example.com", "content": "x" }),
            1004,
            None,
        ),
    ];
    for (body, code, chain) in cases {
        let answer = call(&sim, Method::POST, &path, Some(body.clone())).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::BAD_REQUEST, code as i64),
            "{body}"
        );
        if let Some(chain) = chain {
            assert_eq!(answer.body["errors"][0]["error_chain"][0]["message"], chain);
        }
    }
    let ok = json!({ "type": "TXT", "name": "a.example.com", "content": "x", "ttl": 30 });
    assert_eq!(
        call(&sim, Method::POST, &path, Some(ok)).await.status,
        StatusCode::OK
    );
    assert_eq!(sim.dns_records("example.com").len(), 1);
}

#[tokio::test]
async fn put_replaces_and_patch_merges() {
    let sim = sim();
    let path = records_path(&sim, "example.com");
    let body = json!({ "type": "CNAME", "name": "app.example.com", "content": "a.cfargotunnel.com",
                       "proxied": true, "ttl": 1, "comment": "mine", "tags": ["k:v"] });
    let id = create_record(&sim, "example.com", body).await;
    let record = format!("{path}/{id}");
    let patched = call(
        &sim,
        Method::PATCH,
        &record,
        Some(json!({ "content": "b.cfargotunnel.com" })),
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK);
    let r = patched.result();
    assert_eq!(
        (
            r["content"].clone(),
            r["proxied"].clone(),
            r["comment"].clone()
        ),
        (json!("b.cfargotunnel.com"), json!(true), json!("mine"))
    );
    let put = call(
        &sim,
        Method::PUT,
        &record,
        Some(
            json!({ "type": "CNAME", "name": "app.example.com", "content": "c.cfargotunnel.com" }),
        ),
    )
    .await;
    let r = put.result();
    assert_eq!(
        (
            r["proxied"].clone(),
            r["ttl"].clone(),
            r.get("comment"),
            r["tags"].clone()
        ),
        (json!(false), json!(1), None, json!([]))
    );
    assert_eq!(r["id"], id.as_str());
    let got = get(&sim, &record).await;
    assert_eq!(got.result(), put.result());
    let deleted = call(&sim, Method::DELETE, &record, None).await;
    assert_eq!(
        (deleted.status, deleted.result().clone()),
        (StatusCode::OK, json!({ "id": id }))
    );
    for method in [Method::GET, Method::DELETE] {
        let gone = call(&sim, method, &record, None).await;
        assert_eq!((gone.status, gone.code()), (StatusCode::NOT_FOUND, 81044));
    }
    let unknown_zone = get(&sim, "/zones/0123456789abcdef0123456789abcdef/dns_records").await;
    assert_refused(
        &unknown_zone,
        StatusCode::NOT_FOUND,
        7003,
        "Could not route to /zones/0123456789abcdef0123456789abcdef/dns_records, perhaps your object identifier is invalid?",
    );
}

#[tokio::test]
async fn each_list_filter_selects_exactly() {
    let sim = sim();
    let seed = [
        json!({ "type": "CNAME", "name": "app.example.com", "content": "T1.cfargotunnel.com", "proxied": true, "comment": "managed-by: cftunnel" }),
        json!({ "type": "TXT", "name": "_cft.app.example.com", "content": "\"heritage=cftunnel\"", "comment": "Owner record", "tags": ["team:dns"] }),
        json!({ "type": "A", "name": "www.example.com", "content": "192.0.2.10" }),
        json!({ "type": "CNAME", "name": "api.example.com", "content": "t2.cfargotunnel.com", "proxied": false }),
    ];
    for record in seed {
        create_record(&sim, "example.com", record).await;
    }
    let path = records_path(&sim, "example.com");
    let names = |query: &str| {
        let (sim, url) = (sim.clone(), format!("{path}?{query}"));
        async move {
            let answer = get(&sim, &url).await;
            assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
            answer
                .result()
                .as_array()
                .expect("array")
                .iter()
                .map(|r| r["name"].as_str().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        }
    };
    let cases: [(&str, &[&str]); 18] = [
        ("type=CNAME", &["app.example.com", "api.example.com"]),
        ("name=APP.example.com", &["app.example.com"]),
        (
            "name.exact=app.example.com&type=CNAME",
            &["app.example.com"],
        ),
        ("name=app.example.com&type=TXT", &[]),
        ("content=t1.cfargotunnel.com", &["app.example.com"]),
        (
            "name.startswith=ap",
            &["app.example.com", "api.example.com"],
        ),
        (
            "name.endswith=app.example.com",
            &["app.example.com", "_cft.app.example.com"],
        ),
        ("name.contains=WW", &["www.example.com"]),
        (
            "content.contains=cfargotunnel",
            &["app.example.com", "api.example.com"],
        ),
        ("comment=owner%20record", &["_cft.app.example.com"]),
        (
            "comment.present",
            &["app.example.com", "_cft.app.example.com"],
        ),
        ("comment.absent", &["www.example.com", "api.example.com"]),
        ("comment.startswith=managed-by:", &["app.example.com"]),
        ("comment.contains=RECORD", &["_cft.app.example.com"]),
        ("proxied=true", &["app.example.com"]),
        ("tag=team:dns", &["_cft.app.example.com"]),
        (
            "tag.absent=team",
            &["app.example.com", "www.example.com", "api.example.com"],
        ),
        (
            "type=A&type=TXT&match=any&name=api.example.com",
            &["www.example.com", "api.example.com"],
        ),
    ];
    for (query, expected) in cases {
        assert_eq!(names(query).await, expected.to_vec(), "{query}");
    }
    assert_eq!(
        names("order=name&direction=desc").await,
        vec![
            "www.example.com",
            "app.example.com",
            "api.example.com",
            "_cft.app.example.com"
        ]
    );
    assert_eq!(
        get(&sim, &records_path(&sim, "example.org")).await.result(),
        &json!([])
    );
}

#[tokio::test]
async fn record_pages_keep_creation_order() {
    let sim = sim();
    for i in 0..7 {
        create_record(
            &sim,
            "example.com",
            json!({ "type": "TXT", "name": format!("r{i}.example.com"), "content": "x" }),
        )
        .await;
    }
    let path = records_path(&sim, "example.com");
    let default = get(&sim, &path).await;
    assert_eq!(
        default.body["result_info"],
        json!({ "page": 1, "per_page": 100, "count": 7, "total_count": 7, "total_pages": 1 })
    );
    let mut seen = Vec::new();
    for page in 1..=3 {
        let answer = get(&sim, &format!("{path}?per_page=3&page={page}")).await;
        assert_eq!(answer.body["result_info"]["total_pages"], 3);
        assert_eq!(
            answer.body["result_info"]["count"],
            if page == 3 { 1 } else { 3 }
        );
        seen.extend(answer.names());
    }
    let expected: Vec<Value> = (0..7).map(|i| json!(format!("r{i}.example.com"))).collect();
    assert_eq!(seen, expected);
    let beyond = get(&sim, &format!("{path}?per_page=3&page=9")).await;
    assert_eq!(
        (
            beyond.result().clone(),
            beyond.body["result_info"]["count"].clone()
        ),
        (json!([]), json!(0))
    );
}

#[tokio::test]
async fn seeded_foreign_records_are_visible_and_validated() {
    let sim = sim();
    let id = sim.insert_dns_record(
        "example.com",
        cname("app.example.com", "elsewhere.example.net"),
    );
    assert!(id.is_some());
    assert_eq!(
        sim.insert_dns_record("example.com", json!({ "type": "CNAME" })),
        None
    );
    assert_eq!(
        sim.insert_dns_record("nope.test", cname("a.nope.test", "x.example.net")),
        None
    );
    let clash = call(
        &sim,
        Method::POST,
        &records_path(&sim, "example.com"),
        Some(cname("app.example.com", "t.cfargotunnel.com")),
    )
    .await;
    assert_eq!(clash.code(), 81053);
}
