//! The store's codes as data: every code a store operation refuses or
//! fails with, in the form `coordinatorctl` prints it
//! (`coordinator.command.state-key-custody`, `coordinator.database.url`).
//! A [`DatabaseError`](crate::DatabaseError) keeps the raw code
//! ([`StoreCode::raw`]); whether it is a refusal or an unavailable resource
//! is the raise site's call. Raise sites name the constants
//! (`codes::COMMAND_STATE_KEY_CUSTODY`); the `secret.*` codes a
//! [`SecretError`](coordinator_runtime::secrets::SecretError) carries are
//! `coordinator_runtime::codes`'. Every code has its page under
//! `docs/errors/`.

/// One store code and what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreCode {
    /// The code as `coordinatorctl` prints it, `coordinator.<area>.<condition>`.
    pub code: &'static str,
    /// What it means, in one line (the first sentence of its page's cause).
    pub meaning: &'static str,
}

impl StoreCode {
    /// The raw code a [`DatabaseError`](crate::DatabaseError) keeps
    /// (`state-key-custody`, `database.url`).
    pub fn raw(&self) -> &'static str {
        crate::raw_code(self.code)
    }

    /// Its page, relative to the workspace root: `docs/errors/<code>.md`.
    pub fn page(&self) -> String {
        format!("docs/errors/{}.md", self.code)
    }
}

macro_rules! store_codes {
    ($($name:ident = ($code:literal, $meaning:literal);)+) => {
        $(
            #[doc = concat!("`", $code, "`: ", $meaning)]
            pub const $name: &str = $code;
        )+
        /// Every store code, in code order.
        pub const ALL: &[StoreCode] = &[$(StoreCode { code: $name, meaning: $meaning }),+];
    };
}

store_codes! {
    AUDIT_UNAVAILABLE = ("coordinator.audit.unavailable",
        "The audit journal could not be written.");
    COMMAND_LIVE_BINDING_CONFLICT = ("coordinator.command.live-binding-conflict",
        "The runtime file changes the binding of a connection that runs which have not ended were admitted with: where its calls go or as whom they are made (`type`, `baseUrl`, a BReg or Casework `profile`, a Casework `producer`, a decision `model`, external-http `paths` or `queryParameters`, or `authorization.tokenEndpoint`, `clientId`, `scopes`, `resource`), or it drops that connection.");
    COMMAND_STATE_KEY_CUSTODY = ("coordinator.command.state-key-custody",
        "The configured state keys do not match what the database recorded.");
    COMMAND_STATE_TAMPERED = ("coordinator.command.state-tampered",
        "A stored value does not read back.");
    COMMAND_STORE_UNAVAILABLE = ("coordinator.command.store-unavailable",
        "The database could not be reached or failed a statement.");
    DATABASE_INSECURE_URL = ("coordinator.database.insecure-url",
        "A database URL allows a plaintext connection to a host that is not a loopback host.");
    DATABASE_LOGIN = ("coordinator.database.login",
        "PostgreSQL refused the login.");
    DATABASE_MISSING = ("coordinator.database.missing",
        "PostgreSQL answered, but the database named in the URL does not exist (SQLSTATE `3D000`).");
    DATABASE_READ_ONLY = ("coordinator.database.read-only",
        "Every server the database URL names that answered is a standby.");
    DATABASE_TLS = ("coordinator.database.tls",
        "TLS to the database server cannot work as configured: the server does not accept TLS while the URL asks for it, its certificate is refused (an unknown issuer, another host name, outside its validity), or `database.trustedRootCertificateRef` holds no certificate.");
    DATABASE_URL = ("coordinator.database.url",
        "The secret named by `database.runtimeUrlRef` or `database.migrationUrlRef` does not hold a PostgreSQL URL.");
    DEPLOYMENT_DATABASE_ID = ("coordinator.deployment.database-id",
        "The database records a different `databaseId` than the runtime file.");
    DEPLOYMENT_DATABASE_URLS_DIFFER = ("coordinator.deployment.database-urls-differ",
        "`apply` found that `database.runtimeUrlRef` and `database.migrationUrlRef` reach different databases.");
    DEPLOYMENT_DATABASE_VERSION = ("coordinator.deployment.database-version",
        "The database server is older than PostgreSQL 17.");
    DEPLOYMENT_NOT_APPLIED = ("coordinator.deployment.not-applied",
        "There is no deployment to use.");
    DEPLOYMENT_PACKAGE = ("coordinator.deployment.package",
        "A pinned package could not be loaded.");
    DEPLOYMENT_PACKAGES_NOT_APPLIED = ("coordinator.deployment.packages-not-applied",
        "The runtime file pins a package that is not the active one.");
    DEPLOYMENT_REFUSED = ("coordinator.deployment.refused",
        "While serving, a check the deployment depends on failed.");
    DEPLOYMENT_REMOVE_WORKFLOW = ("coordinator.deployment.remove-workflow",
        "`--remove-workflow ID` names a workflow the runtime file still lists, or one that is not active.");
    DEPLOYMENT_RUNTIME_ROLE_BYPASSRLS = ("coordinator.deployment.runtime-role-bypassrls",
        "The runtime role bypasses row-level security.");
    DEPLOYMENT_RUNTIME_ROLE_CREATE = ("coordinator.deployment.runtime-role-create",
        "The runtime role can create objects in the namespace (also through `PUBLIC`).");
    DEPLOYMENT_RUNTIME_ROLE_MEMBER = ("coordinator.deployment.runtime-role-member",
        "The runtime role is the role that owns the namespace.");
    DEPLOYMENT_RUNTIME_ROLE_MISMATCH = ("coordinator.deployment.runtime-role-mismatch",
        "The runtime database URL logs in as a different role than `deployment.runtimeRole`.");
    DEPLOYMENT_RUNTIME_ROLE_MISSING = ("coordinator.deployment.runtime-role-missing",
        "The role named by `deployment.runtimeRole` does not exist in the database.");
    DEPLOYMENT_RUNTIME_ROLE_SUPERUSER = ("coordinator.deployment.runtime-role-superuser",
        "The runtime role is a superuser.");
    DEPLOYMENT_SCHEMA_VERSION = ("coordinator.deployment.schema-version",
        "The namespace records a state schema version other than the one this binary uses.");
    DEPLOYMENT_WORKFLOW_LIVE_RUNS = ("coordinator.deployment.workflow-live-runs",
        "`--remove-workflow` names a workflow that still has runs that have not ended.");
    DEPLOYMENT_WORKFLOW_UNLISTED = ("coordinator.deployment.workflow-unlisted",
        "A workflow is active in the database but the runtime file no longer lists its package.");
}
