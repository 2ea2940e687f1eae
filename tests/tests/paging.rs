//! The test API server's paged lists, as kube-apiserver pages them (`limit` + `continue`): every
//! object exactly once in key order, `continue` only while more remain, and `remainingItemCount`
//! only for a list without selectors (ListMeta's documentation: with label or field selectors "the
//! number of remaining items is unknown and the field will be left unset").

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use nodemedic_tests::server::TestApiServer;
use serde_json::json;

async fn pages(api: &Api<Node>, params: ListParams) -> Vec<(Vec<String>, Option<i64>, bool)> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut p = params.clone();
        if let Some(t) = &token {
            p = p.continue_token(t);
        }
        let list = api.list(&p).await.unwrap();
        let names = list
            .items
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        token = list.metadata.continue_.filter(|t| !t.is_empty());
        out.push((names, list.metadata.remaining_item_count, token.is_some()));
        if token.is_none() {
            return out;
        }
        assert!(out.len() < 100, "paging does not end: {out:?}");
    }
}

#[tokio::test]
async fn lists_page_by_key_with_counts_only_when_unselective() {
    let server = TestApiServer::start().await;
    for i in 0..7 {
        let pool = if i % 2 == 0 { "even" } else { "odd" };
        server.put_object(
            "v1",
            "nodes",
            None,
            json!({"metadata": {"name": format!("pg-{i}"), "labels": {"pool": pool}}}),
        );
    }
    // Objects of another resource sort between and after: they must not show up nor end a page.
    server.put_object(
        "v1",
        "namespaces",
        None,
        json!({"metadata": {"name": "pg-ns"}}),
    );
    let api: Api<Node> = Api::all(server.client());

    let all = pages(&api, ListParams::default().limit(3)).await;
    let names: Vec<_> = all.iter().flat_map(|(n, _, _)| n.clone()).collect();
    let want: Vec<_> = (0..7).map(|i| format!("pg-{i}")).collect();
    assert_eq!(names, want, "every node once, in name order: {all:?}");
    let counts: Vec<_> = all.iter().map(|(_, c, more)| (*c, *more)).collect();
    assert_eq!(counts, [(Some(4), true), (Some(1), true), (None, false)]);

    // A page that ends exactly at the last object has no continue token.
    let exact = pages(&api, ListParams::default().limit(7)).await;
    assert_eq!(exact.len(), 1, "{exact:?}");
    assert_eq!(exact[0].0.len(), 7);

    // With a selector: the same paging, no count.
    let even = pages(&api, ListParams::default().labels("pool=even").limit(2)).await;
    let names: Vec<_> = even.iter().flat_map(|(n, _, _)| n.clone()).collect();
    assert_eq!(names, ["pg-0", "pg-2", "pg-4", "pg-6"]);
    assert!(even.iter().all(|(_, c, _)| c.is_none()), "{even:?}");
    assert_eq!(even.last().map(|(_, _, more)| *more), Some(false));
    assert_eq!(even.len(), 2, "the second page is the last: {even:?}");
}
