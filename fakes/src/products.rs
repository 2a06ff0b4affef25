//! One fake per product contract of SPEC §6. Each starts on `127.0.0.1:0`,
//! reports its base URL, and exposes its [`Fake`] handle (record, script,
//! token checks, idempotent replay) next to product-specific set-up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::server::{problem, problem_with, serve, Fake, Running};

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What every product fake has: where it listens and its [`Fake`] handle.
#[derive(Clone)]
pub struct Product {
    running: Running,
    fake: Fake,
}

impl Product {
    async fn start(router: Router, fake: Fake) -> std::io::Result<Product> {
        let running = serve(router, &fake).await?;
        Ok(Product { running, fake })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        self.running.base_url()
    }

    /// Record, script, require tokens, count idempotency keys.
    pub fn fake(&self) -> &Fake {
        &self.fake
    }
}

// ---------------------------------------------------------------- BReg ----

/// How a BReg action answers.
#[derive(Clone, Debug)]
pub enum ActionBehaviour {
    /// 200 `{action, results}`.
    Results(Value),
    /// 409 `{code: action.declared-refusal, refusalCode}`.
    DeclaredRefusal(String),
}

#[derive(Default)]
struct BregState {
    records: HashMap<(String, String), Value>,
    actions: HashMap<String, ActionBehaviour>,
    profile: Option<String>,
    invocations: Vec<(String, Value)>,
}

/// Fake Base Registry Engine: records and immediate actions.
#[derive(Clone)]
pub struct FakeBreg {
    product: Product,
    state: Arc<Mutex<BregState>>,
}

impl std::ops::Deref for FakeBreg {
    type Target = Product;
    fn deref(&self) -> &Product {
        &self.product
    }
}

impl FakeBreg {
    /// Starts with no records, no actions and no profile requirement.
    pub async fn start() -> std::io::Result<FakeBreg> {
        let state = Arc::new(Mutex::new(BregState::default()));
        let router = Router::new()
            .route(
                "/v1/collections/{collection}/records/{record}",
                get(breg_read),
            )
            .route("/v1/actions/{action}", post(breg_action))
            .with_state(state.clone());
        Ok(FakeBreg {
            product: Product::start(router, Fake::default()).await?,
            state,
        })
    }

    /// Stores record `collection`/`id` with `data` and revision `revision`.
    pub fn put_record(&self, collection: &str, id: &str, revision: &str, data: Value) {
        locked(&self.state).records.insert(
            (collection.to_owned(), id.to_owned()),
            json!({"collection": collection, "recordId": id, "revision": revision, "data": data}),
        );
    }

    /// Defines action `name`.
    pub fn put_action(&self, name: &str, behaviour: ActionBehaviour) {
        locked(&self.state)
            .actions
            .insert(name.to_owned(), behaviour);
    }

    /// Reads require `registry-access-profile: profile` (else 403
    /// `access.profile-refused`).
    pub fn require_profile(&self, profile: &str) {
        locked(&self.state).profile = Some(profile.to_owned());
    }

    /// Actions that ran (not replays), with their `input`.
    pub fn invocations(&self) -> Vec<(String, Value)> {
        locked(&self.state).invocations.clone()
    }
}

async fn breg_read(
    State(state): State<Arc<Mutex<BregState>>>,
    Path((collection, record)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let st = locked(&state);
    if let Some(p) = &st.profile {
        let sent = headers
            .get("registry-access-profile")
            .and_then(|v| v.to_str().ok());
        if sent != Some(p.as_str()) {
            return problem(403, "access.profile-refused");
        }
    }
    match st.records.get(&(collection, record)) {
        Some(r) => Json(r.clone()).into_response(),
        None => problem(404, "record.not-found"),
    }
}

async fn breg_action(
    State(state): State<Arc<Mutex<BregState>>>,
    Path(action): Path<String>,
    body: Option<Json<Value>>,
) -> Response {
    let Some(Json(body)) = body else {
        return problem(400, "request.invalid");
    };
    let mut st = locked(&state);
    let behaviour = st.actions.get(&action).cloned();
    match behaviour {
        None => problem(404, "action.not-found"),
        Some(ActionBehaviour::Results(results)) => {
            st.invocations.push((
                action.clone(),
                body.get("input").cloned().unwrap_or(Value::Null),
            ));
            Json(json!({"action": action, "results": results})).into_response()
        }
        Some(ActionBehaviour::DeclaredRefusal(code)) => {
            problem_with(409, "action.declared-refusal", json!({"refusalCode": code}))
        }
    }
}

// ----------------------------------------------------------- Messaging ----

/// Fake Registry Messaging: messages (202) and receipts by idempotency key.
#[derive(Clone)]
pub struct FakeMessaging {
    product: Product,
    messages: Arc<Mutex<Vec<Value>>>,
}

impl std::ops::Deref for FakeMessaging {
    type Target = Product;
    fn deref(&self) -> &Product {
        &self.product
    }
}

impl FakeMessaging {
    /// Starts with no messages.
    pub async fn start() -> std::io::Result<FakeMessaging> {
        let messages = Arc::new(Mutex::new(Vec::new()));
        let fake = Fake::default();
        let router = Router::new()
            .route("/v1/messages", post(submit_message))
            .with_state(messages.clone())
            .merge(
                Router::new()
                    .route("/v1/message-receipts/{key}", get(message_receipt))
                    .with_state(fake.clone()),
            );
        Ok(FakeMessaging {
            product: Product::start(router, fake).await?,
            messages,
        })
    }

    /// Accepted messages (request bodies), in order; replays not repeated.
    pub fn messages(&self) -> Vec<Value> {
        locked(&self.messages).clone()
    }

    /// The messages accepted since the last call (or the start), in
    /// order, forgotten here (the sandbox counts them and keeps none).
    pub fn take_messages(&self) -> Vec<Value> {
        std::mem::take(&mut *locked(&self.messages))
    }
}

async fn submit_message(
    State(messages): State<Arc<Mutex<Vec<Value>>>>,
    body: Option<Json<Value>>,
) -> Response {
    let Some(Json(body)) = body else {
        return problem(400, "request.invalid");
    };
    locked(&messages).push(body);
    (
        StatusCode::ACCEPTED,
        Json(json!({"id": uuid::Uuid::new_v4().to_string(), "status": "accepted"})),
    )
        .into_response()
}

async fn message_receipt(State(fake): State<Fake>, Path(key): Path<String>) -> Response {
    fake.receipt("/v1/messages", &key)
}

// ---------------------------------------------------------- Scheduling ----

#[derive(Default)]
struct SchedulingState {
    /// offering → slots `{start, end, free}`.
    slots: HashMap<String, Vec<Value>>,
    appointments: Vec<Value>,
}

/// Fake Registry Scheduling: availability, appointments and receipts.
#[derive(Clone)]
pub struct FakeScheduling {
    product: Product,
    state: Arc<Mutex<SchedulingState>>,
}

impl std::ops::Deref for FakeScheduling {
    type Target = Product;
    fn deref(&self) -> &Product {
        &self.product
    }
}

impl FakeScheduling {
    /// Starts with no slots.
    pub async fn start() -> std::io::Result<FakeScheduling> {
        let state = Arc::new(Mutex::new(SchedulingState::default()));
        let fake = Fake::default();
        let router = Router::new()
            .route("/v1/availability", get(availability))
            .route("/v1/appointments", post(create_appointment))
            .with_state(state.clone())
            .merge(
                Router::new()
                    .route("/v1/appointment-receipts/{key}", get(appointment_receipt))
                    .with_state(fake.clone()),
            );
        Ok(FakeScheduling {
            product: Product::start(router, fake).await?,
            state,
        })
    }

    /// Adds a slot of `offering` (RFC 3339 instants in UTC with `Z`).
    pub fn add_slot(&self, offering: &str, start: &str, end: &str, free: u32) {
        locked(&self.state)
            .slots
            .entry(offering.to_owned())
            .or_default()
            .push(json!({"start": start, "end": end, "free": free}));
    }

    /// Appointments made (replays not repeated).
    pub fn appointments(&self) -> Vec<Value> {
        locked(&self.state).appointments.clone()
    }
}

async fn availability(
    State(state): State<Arc<Mutex<SchedulingState>>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (Some(offering), Some(start), Some(end)) =
        (q.get("offering"), q.get("start"), q.get("end"))
    else {
        return problem(400, "request.invalid");
    };
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(100);
    let st = locked(&state);
    let items: Vec<Value> = st
        .slots
        .get(offering)
        .into_iter()
        .flatten()
        .filter(|s| {
            s["start"].as_str().is_some_and(|v| v >= start.as_str())
                && s["end"].as_str().is_some_and(|v| v <= end.as_str())
        })
        .take(limit)
        .cloned()
        .collect();
    Json(json!({"items": items, "nextCursor": null})).into_response()
}

async fn create_appointment(
    State(state): State<Arc<Mutex<SchedulingState>>>,
    body: Option<Json<Value>>,
) -> Response {
    let Some(Json(body)) = body else {
        return problem(400, "request.invalid");
    };
    let (Some(offering), Some(start)) = (body["offering"].as_str(), body["start"].as_str()) else {
        return problem(400, "request.invalid");
    };
    let mut st = locked(&state);
    let slot = st.slots.get_mut(offering).and_then(|slots| {
        slots
            .iter_mut()
            .find(|s| s["start"] == start && s["free"].as_u64() > Some(0))
    });
    let Some(slot) = slot else {
        return problem(409, "appointment.unavailable");
    };
    slot["free"] = json!(slot["free"].as_u64().unwrap_or(1) - 1);
    let appointment = json!({
        "appointmentId": uuid::Uuid::new_v4().to_string(),
        "offering": offering,
        "start": start,
        "end": slot["end"],
    });
    st.appointments.push(appointment.clone());
    (StatusCode::CREATED, Json(appointment)).into_response()
}

async fn appointment_receipt(State(fake): State<Fake>, Path(key): Path<String>) -> Response {
    fake.receipt("/v1/appointments", &key)
}

// ------------------------------------------------------------ Casework ----

#[derive(Default)]
struct CaseworkState {
    requests: Vec<Value>,
    producer: Option<String>,
}

/// Fake Casework: review requests a test decides or leaves pending,
/// withdrawal, reads; and a client for `POST /v1/review-completions`.
#[derive(Clone)]
pub struct FakeCasework {
    product: Product,
    state: Arc<Mutex<CaseworkState>>,
}

impl std::ops::Deref for FakeCasework {
    type Target = Product;
    fn deref(&self) -> &Product {
        &self.product
    }
}

impl FakeCasework {
    /// Starts with no review requests, trusting every producer.
    pub async fn start() -> std::io::Result<FakeCasework> {
        let state = Arc::new(Mutex::new(CaseworkState::default()));
        let router = Router::new()
            .route("/v1/review-requests", post(submit_review))
            .route("/v1/review-requests/{id}", get(read_review))
            .route("/v1/review-requests/{id}/withdraw", post(withdraw_review))
            .with_state(state.clone());
        Ok(FakeCasework {
            product: Product::start(router, Fake::default()).await?,
            state,
        })
    }

    /// Only `producer` may submit (else 403 `producer.untrusted`).
    pub fn trust_only(&self, producer: &str) {
        locked(&self.state).producer = Some(producer.to_owned());
    }

    /// Every review request `{id, status, producer, subject, policy,
    /// summary, decision?}`.
    pub fn review_requests(&self) -> Vec<Value> {
        locked(&self.state).requests.clone()
    }

    /// Decides review request `id` (if pending): `decision` = `{outcome,
    /// decidedAt, note?}`. Returns whether it was pending.
    pub fn decide(&self, id: &str, outcome: &str, decided_at: &str, note: Option<&str>) -> bool {
        let mut st = locked(&self.state);
        let Some(r) = st.requests.iter_mut().find(|r| r["id"] == id) else {
            return false;
        };
        if r["status"] != "pending" {
            return false;
        }
        let mut decision = json!({"outcome": outcome, "decidedAt": decided_at});
        if let Some(n) = note {
            decision["note"] = json!(n);
        }
        r["status"] = json!("decided");
        r["decision"] = decision;
        true
    }

    /// Posts a completion event to `url` (the coordinator's
    /// `/v1/review-completions`) as Casework would: `Authorization: Bearer
    /// token`, `registry-recipient-binding: binding`, body
    /// `{reviewRequestId}`. Returns the status and body.
    pub async fn post_completion(
        url: &str,
        token: &str,
        binding: &str,
        review_request_id: &str,
    ) -> Result<(u16, String), reqwest::Error> {
        let response = reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .header("registry-recipient-binding", binding)
            .header("content-type", "application/json")
            .body(json!({"reviewRequestId": review_request_id}).to_string())
            .send()
            .await?;
        let status = response.status().as_u16();
        Ok((status, response.text().await?))
    }
}

fn public_view(r: &Value) -> Value {
    let mut v = json!({"id": r["id"], "status": r["status"]});
    if let Some(d) = r.get("decision") {
        v["decision"] = d.clone();
    }
    v
}

async fn submit_review(
    State(state): State<Arc<Mutex<CaseworkState>>>,
    body: Option<Json<Value>>,
) -> Response {
    let Some(Json(body)) = body else {
        return problem(400, "request.invalid");
    };
    let Some(producer) = body["producer"].as_str() else {
        return problem(400, "request.invalid");
    };
    let mut st = locked(&state);
    if st.producer.as_deref().is_some_and(|p| p != producer) {
        return problem(403, "producer.untrusted");
    }
    let id = uuid::Uuid::new_v4().to_string();
    let mut stored = body.clone();
    stored["id"] = json!(id);
    stored["status"] = json!("pending");
    st.requests.push(stored);
    (
        StatusCode::CREATED,
        Json(json!({"id": id, "status": "pending"})),
    )
        .into_response()
}

async fn read_review(
    State(state): State<Arc<Mutex<CaseworkState>>>,
    Path(id): Path<String>,
) -> Response {
    match locked(&state)
        .requests
        .iter()
        .find(|r| r["id"] == id.as_str())
    {
        Some(r) => Json(public_view(r)).into_response(),
        None => problem(404, "review-request.not-found"),
    }
}

async fn withdraw_review(
    State(state): State<Arc<Mutex<CaseworkState>>>,
    Path(id): Path<String>,
) -> Response {
    let mut st = locked(&state);
    let Some(r) = st.requests.iter_mut().find(|r| r["id"] == id.as_str()) else {
        return problem(404, "review-request.not-found");
    };
    if r["status"] == "pending" {
        r["status"] = json!("withdrawn");
    }
    Json(json!({"id": r["id"], "status": r["status"]})).into_response()
}

// ------------------------------------------------------ External (HTTP) ----

#[derive(Clone)]
enum Route {
    Json(u16, Value),
    Redirect(String),
}

/// Fake external directory (`external.get/v1`): any path (any method) answers what
/// the test set, or 404.
#[derive(Clone)]
pub struct FakeDirectory {
    product: Product,
    routes: Arc<Mutex<HashMap<String, Route>>>,
}

impl std::ops::Deref for FakeDirectory {
    type Target = Product;
    fn deref(&self) -> &Product {
        &self.product
    }
}

impl FakeDirectory {
    /// Starts with no routes.
    pub async fn start() -> std::io::Result<FakeDirectory> {
        let routes = Arc::new(Mutex::new(HashMap::new()));
        let router = Router::new().fallback(directory).with_state(routes.clone());
        Ok(FakeDirectory {
            product: Product::start(router, Fake::default()).await?,
            routes,
        })
    }

    /// GET `path` answers `status` with JSON `body`.
    pub fn respond(&self, path: &str, status: u16, body: Value) {
        locked(&self.routes).insert(path.to_owned(), Route::Json(status, body));
    }

    /// GET `path` answers 302 to `location`.
    pub fn redirect(&self, path: &str, location: &str) {
        locked(&self.routes).insert(path.to_owned(), Route::Redirect(location.to_owned()));
    }
}

async fn directory(State(routes): State<Arc<Mutex<HashMap<String, Route>>>>, uri: Uri) -> Response {
    match locked(&routes).get(uri.path()).cloned() {
        Some(Route::Json(status, body)) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            Json(body),
        )
            .into_response(),
        Some(Route::Redirect(location)) => {
            (StatusCode::FOUND, [("location", location)], "").into_response()
        }
        None => problem(404, "not-found"),
    }
}

// ---------------------------------------------------------- Evaluation ----

/// Fake decision service (`evaluation.evaluate/v1`).
#[derive(Clone)]
pub struct FakeEvaluation {
    product: Product,
    answers: Arc<Mutex<Option<Value>>>,
}

impl std::ops::Deref for FakeEvaluation {
    type Target = Product;
    fn deref(&self) -> &Product {
        &self.product
    }
}

impl FakeEvaluation {
    /// Starts answering every question plainly (first choice, `true`,
    /// score 0.5) unless [`Self::set_answers`] says otherwise.
    pub async fn start() -> std::io::Result<FakeEvaluation> {
        let answers = Arc::new(Mutex::new(None));
        let router = Router::new()
            .route("/v1/evaluations", post(evaluate))
            .with_state(answers.clone());
        Ok(FakeEvaluation {
            product: Product::start(router, Fake::default()).await?,
            answers,
        })
    }

    /// Answers every evaluation with this `answers` map.
    pub fn set_answers(&self, answers: Value) {
        *locked(&self.answers) = Some(answers);
    }
}

async fn evaluate(
    State(answers): State<Arc<Mutex<Option<Value>>>>,
    body: Option<Json<Value>>,
) -> Response {
    let Some(Json(body)) = body else {
        return problem(400, "request.invalid");
    };
    let answers = locked(&answers).clone().unwrap_or_else(|| {
        let mut map = serde_json::Map::new();
        if let Some(questions) = body["questions"].as_object() {
            for (name, q) in questions {
                let answer = match q["type"].as_str() {
                    Some("choice") => {
                        json!({"type": "choice", "choice": q["choices"][0], "confidence": 0.9})
                    }
                    Some("predicate") => {
                        json!({"type": "predicate", "value": true, "confidence": 0.9})
                    }
                    _ => json!({"type": "score", "score": 0.5, "confidence": 0.9}),
                };
                map.insert(name.clone(), answer);
            }
        }
        Value::Object(map)
    });
    Json(json!({
        "model": body["model"],
        "answers": answers,
        "usage": {"inputTokens": 1, "outputTokens": 1},
    }))
    .into_response()
}
