//! The `coordinatorctl` binary end to end (one test binary): seed 004's
//! author journey byte for byte (`seed004`), bad input and closed pipes
//! (`robustness`), the deployment commands on PostgreSQL
//! (`deploy_postgres`) and the caller and operator commands over a real
//! service (`ops`).

mod deploy_postgres;
mod ops;
mod robustness;
mod seed004;
