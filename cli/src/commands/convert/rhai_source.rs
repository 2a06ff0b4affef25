//! OLD's `functions.rhai`: its functions (listed by the compiler's one
//! reader, `coordinator_compiler::functions::list_functions`), where each
//! is defined, and the small wrappers `convert` appends when an older
//! Function only needs its data reshaped.

use coordinator_compiler::functions::{list_functions, ScriptFn};
use coordinator_source::{Diagnostic, Located};

/// OLD's Rhai source with its functions.
pub struct RhaiSource {
    /// The display name of the file (OLD's path joined with the file name).
    pub display: String,
    /// The source text as read.
    pub text: String,
    /// The script functions with their parameter names.
    pub functions: Vec<ScriptFn>,
    /// Wrappers generated so far, appended to NEW's functions.rhai.
    wrappers: Vec<String>,
    /// (wrapped function, its wrapper) for each wrapper generated.
    wrapped: Vec<(String, String)>,
}

impl RhaiSource {
    /// Lists the functions of `text`; a located syntax error when it does
    /// not parse.
    pub fn read(display: &str, text: String) -> Result<RhaiSource, Diagnostic> {
        let functions = list_functions(&text, display)?;
        Ok(RhaiSource {
            display: display.to_owned(),
            text,
            functions,
            wrappers: Vec::new(),
            wrapped: Vec::new(),
        })
    }

    /// The parameters of function `name` (the first definition).
    pub fn parameters(&self, name: &str) -> Option<&[String]> {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.params.as_slice())
    }

    /// Where `fn name(` starts in the source (line 1, column 1 when the
    /// text has no such definition).
    pub fn locate(&self, name: &str) -> Located {
        let needle = format!("fn {name}(");
        let (mut line, mut column) = (1, 1);
        for (number, text) in self.text.lines().enumerate() {
            if let Some(at) = text.find(&needle) {
                line = u32::try_from(number + 1).unwrap_or(u32::MAX);
                column = u32::try_from(text[..at].chars().count() + 1).unwrap_or(u32::MAX);
                break;
            }
        }
        Located {
            file: self.display.clone(),
            line,
            column,
            pointer: String::new(),
        }
    }

    /// Appends a wrapper around `name` that makes the `path` member of
    /// its result start with `/` (v1alpha1's `external-get` paths were
    /// relative, `external.get/v1`'s start with `/`). Returns the
    /// wrapper's name; the wrapper takes the same parameters.
    pub fn wrap_path_slash(&mut self, name: &str) -> String {
        if let Some((_, wrapper)) = self.wrapped.iter().find(|(wrapped, _)| wrapped == name) {
            return wrapper.clone();
        }
        // A name OLD does not use already.
        let mut wrapper = format!("{name}_path");
        let mut n = 1;
        while self.functions.iter().any(|f| f.name == wrapper) {
            n += 1;
            wrapper = format!("{name}_path_{n}");
        }
        self.wrapped.push((name.to_owned(), wrapper.clone()));
        let params = self.parameters(name).unwrap_or_default().join(", ");
        self.wrappers.push(format!(
            "// convert: `{name}` with a path that starts with `/` (external.get/v1).\n\
             fn {wrapper}({params}) {{\n    let request = {name}({params});\n    \
             if !request.path.starts_with(\"/\") {{\n        request.path = \"/\" + request.path;\n    }}\n    \
             request\n}}\n"
        ));
        self.functions.push(ScriptFn {
            name: wrapper.clone(),
            params: self.parameters(name).unwrap_or_default().to_vec(),
        });
        wrapper
    }

    /// NEW's functions.rhai: OLD's text, then the wrappers.
    pub fn new_text(&self) -> String {
        let mut text = self.text.clone();
        if !self.wrappers.is_empty() {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(
                "\n// Wrappers written by `coordinatorctl convert --from v1alpha1`: each\n\
                 // calls the older Function above and reshapes its data only.\n",
            );
            for w in &self.wrappers {
                text.push('\n');
                text.push_str(w);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::RhaiSource;

    #[test]
    fn a_wrapper_takes_a_name_old_does_not_use_and_is_written_once() {
        let text = "fn req(input) { #{ path: \"a\" } }\nfn req_path() { 1 }\n".to_owned();
        let mut source = RhaiSource::read("functions.rhai", text).expect("parses");
        assert_eq!(source.wrap_path_slash("req"), "req_path_2");
        assert_eq!(source.wrap_path_slash("req"), "req_path_2");
        let new = source.new_text();
        assert_eq!(new.matches("fn req_path_2(input)").count(), 1, "{new}");
        assert!(new.contains("fn req_path() { 1 }"), "{new}");
        let back = RhaiSource::read("functions.rhai", new).expect("NEW's source parses");
        assert_eq!(
            back.parameters("req_path_2"),
            Some(&["input".to_owned()][..])
        );
        assert_eq!(source.locate("req_path").line, 2);
    }
}
