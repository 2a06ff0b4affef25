//! `deployment.authentication`: the token issuer, audience and JWKS, and the
//! policies that grant run and deployment-wide actions.

use super::{ptr, Checker, DEPLOYMENT_ACTIONS, OPERATOR_RUN_ACTIONS, RUN_ACTIONS};
use crate::codes;
use crate::config::{Authentication, Jwks, Policy, RuntimeConfig};

impl Checker<'_> {
    /// `deployment.authentication`: the issuer URL (no event source may use
    /// it as its `source`), the audience, the JWKS, and each client's policy.
    pub(super) fn authentication(&mut self, cfg: &RuntimeConfig, auth: &Authentication) {
        self.url("/deployment/authentication/issuer", &auth.issuer, true);
        for (name, source) in &cfg.event_sources {
            if source.source == auth.issuer {
                self.err(
                    codes::RUNTIME_EVENT_SOURCE_ISSUER,
                    self.doc.locate(&ptr(&["eventSources", name, "source"])),
                    format!("event source `{name}` has the token issuer's URI as its `source`; its runs would share an owner with that issuer's token callers"),
                    "Use the producer's own source URI (the CloudEvents `source` it sends).",
                );
            }
        }
        self.non_empty("/deployment/authentication/audience", &auth.audience);
        match &auth.jwks {
            Some(Jwks::Uri(u)) => self.url("/deployment/authentication/jwks/uri", u, false),
            Some(Jwks::File(f)) => self.absolute("/deployment/authentication/jwks/file", f),
            None => {}
        }
        for (client, policy) in &auth.policies {
            self.policy(client, policy);
        }
    }

    /// One client's policy: known actions, deployment-wide ones only with
    /// `operator: true`, and `workflows` only beside run actions.
    fn policy(&mut self, client: &str, policy: &Policy) {
        let base = ptr(&["deployment", "authentication", "policies", client]);
        if policy.actions.is_empty() {
            self.err(
                codes::RUNTIME_POLICY_EMPTY,
                self.doc.locate(&format!("{base}/actions")),
                format!("policy `{client}` grants no action"),
                "List the actions this client needs, or remove the policy.",
            );
        }
        let mut run_actions = 0;
        for (i, a) in policy.actions.iter().enumerate() {
            let at = self.doc.locate(&format!("{base}/actions/{i}"));
            if RUN_ACTIONS.contains(&a.as_str()) {
                run_actions += 1;
            }
            if RUN_ACTIONS.contains(&a.as_str()) && !OPERATOR_RUN_ACTIONS.contains(&a.as_str()) {
                continue;
            }
            if RUN_ACTIONS.contains(&a.as_str()) || DEPLOYMENT_ACTIONS.contains(&a.as_str()) {
                if !policy.operator {
                    self.err(
                        codes::RUNTIME_POLICY_OPERATOR_REQUIRED,
                        at,
                        format!("policy `{client}` grants the operator's action `{a}` without `operator: true`"),
                        "Add `operator: true` to an operator's policy, keeping producers and operators in separate policies.",
                    );
                }
            } else {
                self.err(
                    codes::RUNTIME_POLICY_UNKNOWN_ACTION,
                    at,
                    format!("policy `{client}` grants `{a}`, which is not an action"),
                    format!(
                        "Use run actions ({}) or deployment-wide actions ({}).",
                        RUN_ACTIONS.join(", "),
                        DEPLOYMENT_ACTIONS.join(", ")
                    ),
                );
                run_actions += 1; // do not also report a workflows scope fault
            }
        }
        if policy.workflows.is_some() && run_actions == 0 && !policy.actions.is_empty() {
            self.err(
                codes::RUNTIME_POLICY_WORKFLOWS_SCOPE,
                self.doc.locate_key(&format!("{base}/workflows")),
                format!("policy `{client}` sets `workflows` but lists only deployment-wide actions, which act on every workflow at once"),
                "Remove `workflows` from this policy.",
            );
        }
    }
}
