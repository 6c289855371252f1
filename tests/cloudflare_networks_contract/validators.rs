//! Guards the guard: the checks of the other tests would pass vacuously if validation
//! accepted anything.
use serde_json::{Value, json};

use crate::harness::Documents;

#[test]
fn the_validators_catch_what_the_documents_forbid() {
    let docs = Documents::load();
    let api = &docs.networks;
    let create_route = "tunnel-route-create-a-tunnel-route";
    let tunnel = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415";
    let good = json!({"network": "10.0.0.0/8", "tunnel_id": tunnel});
    assert_eq!(api.validate_request(create_route, Some(&good)), Ok(()));
    let no_network = json!({"tunnel_id": tunnel});
    assert!(
        api.validate_request(create_route, Some(&no_network))
            .is_err()
    );
    let create_network = "tunnel-virtual-network-create-a-virtual-network";
    assert!(
        api.validate_request(create_network, Some(&json!({"comment": "c"})))
            .is_err()
    );
    let long_name = json!({"name": "n".repeat(257)});
    assert!(
        api.validate_request(create_network, Some(&long_name))
            .is_err()
    );
    let list_networks = "tunnel-virtual-network-list-virtual-networks";
    let listed = |network: Value| json!({"success": true, "errors": [], "messages": [], "result": [network]});
    let network = json!({"id": tunnel, "name": "n", "comment": "", "is_default_network": true,
        "created_at": "2026-01-01T00:00:00Z"});
    assert_eq!(
        api.validate_response(list_networks, 200, &listed(network)),
        Ok(())
    );
    let no_flag =
        json!({"id": tunnel, "name": "n", "comment": "", "created_at": "2026-01-01T00:00:00Z"});
    assert!(
        api.validate_response(list_networks, 200, &listed(no_flag))
            .is_err()
    );
    let list_routes = "tunnel-route-list-tunnel-routes";
    let odd_type = json!({"success": true, "errors": [], "messages": [],
        "result": [{"id": "r", "network": "10.0.0.0/8", "tun_type": "carrier_pigeon"}]});
    assert!(api.validate_response(list_routes, 200, &odd_type).is_err());
    assert!(
        api.validate_query(list_routes, "tunnel_id=x&page=1&per_page=2")
            .is_ok()
    );
    assert!(api.validate_query(list_routes, "hostname=x").is_err());
    assert!(
        api.validate_query(list_networks, "page=1").is_err(),
        "the vnet list is not paged"
    );
    let failure_with_result = json!({"success": false,
        "errors": [{"code": 1015, "message": "not routed"}], "messages": [], "result": []});
    assert!(
        api.validate_response(
            "tunnel-route-delete-a-tunnel-route",
            404,
            &failure_with_result
        )
        .is_err()
    );

    let api = &docs.hostname_routes;
    let get = "zero-trust-networks-route-hostname-get";
    let answer =
        |route: Value| json!({"success": true, "errors": [], "messages": [], "result": route});
    let route = json!({"id": tunnel, "hostname": "a.corp", "tunnel_id": tunnel,
        "tun_type": "cfd_tunnel", "comment": "", "created_at": "2026-01-01T00:00:00Z",
        "deleted_at": null});
    assert_eq!(api.validate_response(get, 200, &answer(route)), Ok(()));
    let gre = json!({"id": tunnel, "hostname": "a.corp", "tun_type": "gre"});
    assert!(api.validate_response(get, 200, &answer(gre)).is_err());
    let not_a_date = json!({"id": tunnel, "created_at": "yesterday"});
    assert!(
        api.validate_response(get, 200, &answer(not_a_date))
            .is_err()
    );
    let create = "zero-trust-networks-route-hostname-create";
    assert!(
        api.validate_request(create, Some(&json!({"hostname": 5})))
            .is_err()
    );
    assert!(
        api.validate_query(
            "zero-trust-networks-route-hostname-list",
            "network_subset=x"
        )
        .is_err()
    );
}
