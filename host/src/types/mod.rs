pub fn typescript(_p: &coordinator_ir::Program) -> String {
    String::new()
}
