//! One module per subcommand.

pub mod check;
pub mod console;
pub mod convert;
pub mod copy_secrets;
pub mod deploy;
pub mod explain;
pub mod graph;
pub mod init;
pub mod lsp;
pub mod moves;
pub mod openapi;
pub mod ops;
pub mod package;
pub mod scenario;
pub mod schema;
pub mod test;
pub mod timeline;
pub mod types;
