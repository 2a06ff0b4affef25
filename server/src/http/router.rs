//! The router of SPEC §8's implemented routes and its layers, in the
//! order they apply.

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use coordinator_api as api;
use coordinator_api::problems;

use super::document::openapi_document;
use super::event_starts::event_start;
use super::exports::export_run;
use super::middleware::{json_bodies_only, no_store, single_valued_headers};
use super::moves::move_run;
use super::recovery::recover;
use super::response::json;
use super::review_completions::review_completion;
use super::runs::{inspect, list, start, status};
use super::{ApiError, AppState};
use crate::clock_skew::refuse_while_clock_skewed;
use crate::{ops, readiness};

/// The router of SPEC §8's implemented routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/ready", get(readiness::ready))
        .route("/health", get(health))
        .route("/v1/runs", json_post(start).get(list))
        .route("/v1/runs/{run}", get(status))
        .route("/v1/runs/{run}/inspect", get(inspect))
        // A move certificate may outgrow 64 KiB: this route alone reads up
        // to 1 MiB (the inner limit wins over the router's).
        .route(
            "/v1/runs/{run}/move",
            json_post(move_run).layer(DefaultBodyLimit::max(api::MAX_MOVE_BODY_BYTES)),
        )
        .route("/v1/runs/{run}/export", json_post(export_run))
        .route("/v1/runs/{run}/{action}", json_post(recover))
        .route("/v1/events/{workflow}/{trigger}", json_post(event_start))
        .route("/v1/review-completions", json_post(review_completion))
        .route("/v1/doctor", get(ops::doctor))
        .route("/v1/restore-hold", json_post(ops::restore_hold))
        .route(
            "/v1/release-restore-hold",
            json_post(ops::release_restore_hold),
        )
        .route(
            "/v1/complete-execution-recovery",
            json_post(ops::complete_execution_recovery),
        )
        .route(
            "/v1/release-admission-hold",
            json_post(ops::release_admission_hold),
        )
        .route("/v1/retention", json_post(ops::retention))
        .route(api::openapi::SERVED_DOCUMENT_PATH, get(openapi_document))
        .fallback(|| async { ApiError::of(&problems::ROUTE_NOT_FOUND) })
        .method_not_allowed_fallback(|| async {
            ApiError::of(&problems::METHOD_NOT_ALLOWED)
                .detail("see docs/openapi.json for each route's method")
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_while_clock_skewed,
        ))
        .layer(DefaultBodyLimit::max(api::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(single_valued_headers))
        .layer(axum::middleware::map_response(no_store))
        .with_state(state)
}

/// A `POST` route whose body is JSON ([`json_bodies_only`]): the media type
/// is checked only once the method matched, so a method the path lacks is
/// 405 `method.not-allowed` with `Allow`, whatever its body.
pub(crate) fn json_post<H, T>(handler: H) -> axum::routing::MethodRouter<AppState>
where
    H: axum::handler::Handler<T, AppState>,
    T: 'static,
{
    post(handler).route_layer(axum::middleware::from_fn(json_bodies_only))
}

pub(crate) async fn health() -> Response {
    json(StatusCode::OK, &serde_json::json!({"live": true}))
}
