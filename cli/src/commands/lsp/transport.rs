//! The stdio transport of `coordinatorctl lsp`: LSP base-protocol frames
//! (`Content-Length: N`, a blank line, N bytes of JSON) read with limits,
//! and `lsp_server::Message`s written back.
//!
//! lsp-server's own stdio transport ends its reader at the first malformed
//! payload, and sizes its buffer from `Content-Length` unchecked; an editor
//! that sends one bad message (or a stray byte) would lose its server. So
//! the frames are cut here, bounded, and every body is handed to
//! lsp-server's `Message` (serde) as it stands: a body that is not JSON, or
//! not a JSON-RPC message, is answered with a JSON-RPC error and the next
//! frame is read (docs/decisions.md "The language server").

use std::io::{BufRead, Read, Write};

use lsp_server::Message;
use serde_json::{json, Value};

/// The largest message body read: a `didOpen` of a 1 MiB file, escaped,
/// fits several times over. A larger body is skipped, unread.
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The longest header line read; a longer line is skipped.
const MAX_HEADER_LINE: usize = 8 * 1024;

/// What the next frame on the input holds.
#[derive(Debug)]
pub enum Frame {
    /// A JSON-RPC message.
    Message(Message),
    /// A frame whose body is not a message: the error to answer with
    /// (already a JSON-RPC response object), or `None` when there is nothing
    /// to answer (a response to the server, which sends no requests, or a
    /// header that could not be read).
    Malformed(Option<Value>),
    /// The input ended (or broke mid-frame).
    End,
}

/// Reads one frame. Never panics, never allocates more than
/// [`MAX_BODY_BYTES`] for a body, whatever the input.
pub fn read(input: &mut impl BufRead) -> Frame {
    let mut length: Option<usize> = None;
    let mut bad_header = false;
    let mut any_header = false;
    loop {
        let mut line = Vec::new();
        match input
            .by_ref()
            .take(MAX_HEADER_LINE as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => return Frame::End,
            Ok(_) => {}
            Err(_) => return Frame::End,
        }
        if line.last() != Some(&b'\n') {
            // A header line longer than the limit: skip the rest of it.
            bad_header = true;
            if skip_line(input).is_err() {
                return Frame::End;
            }
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.is_empty() {
            if !any_header {
                // Blank lines between frames are tolerated.
                continue;
            }
            break;
        }
        any_header = true;
        match text.split_once(':') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<usize>() {
                    Ok(n) => length = Some(n),
                    Err(_) => bad_header = true,
                }
            }
            Some(_) => {}
            None => bad_header = true,
        }
    }
    let Some(length) = length else {
        return Frame::Malformed(None);
    };
    if length > MAX_BODY_BYTES {
        // Skip the body without holding it.
        return match std::io::copy(
            &mut input.by_ref().take(length as u64),
            &mut std::io::sink(),
        ) {
            Ok(n) if n == length as u64 => Frame::Malformed(Some(error(
                Value::Null,
                lsp_server::ErrorCode::InvalidRequest,
                &format!("the message is {length} bytes; at most {MAX_BODY_BYTES} are read"),
            ))),
            _ => Frame::End,
        };
    }
    let mut body = vec![0u8; length];
    if input.read_exact(&mut body).is_err() {
        return Frame::End;
    }
    if bad_header {
        return Frame::Malformed(None);
    }
    parse(&body)
}

fn skip_line(input: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}

/// A body read as a message, or the error that answers it.
fn parse(body: &[u8]) -> Frame {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Frame::Malformed(Some(error(
                Value::Null,
                lsp_server::ErrorCode::ParseError,
                &format!("the message is not JSON: {e}"),
            )))
        }
    };
    // The id to echo: JSON-RPC ids are strings, numbers or null.
    let id = match value.get("id") {
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        _ => Value::Null,
    };
    let has_id = value.get("id").is_some();
    let is_response = value.get("method").is_none()
        && (value.get("result").is_some() || value.get("error").is_some());
    match serde_json::from_value::<Message>(value) {
        // An id lsp-server cannot hold (a fraction, a number past 32 bits,
        // an object) would make a request a notification: it is refused.
        Ok(Message::Notification(_)) if has_id => Frame::Malformed(Some(error(
            id,
            lsp_server::ErrorCode::InvalidRequest,
            "the request's id is not a string or a 32-bit integer",
        ))),
        Ok(m) => Frame::Message(m),
        // A response (to a request this server never sent): nothing to say.
        Err(_) if is_response => Frame::Malformed(None),
        Err(e) => Frame::Malformed(Some(error(
            id,
            lsp_server::ErrorCode::InvalidRequest,
            &format!("not a JSON-RPC request or notification: {e}"),
        ))),
    }
}

/// A JSON-RPC error response object.
pub fn error(id: Value, code: lsp_server::ErrorCode, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code as i32, "message": message}})
}

/// Writes one message (lsp-server's own framing). A failure is returned,
/// and the server stops: the editor is gone.
pub fn write(out: &mut impl Write, message: &Message) -> std::io::Result<()> {
    message.write(out)
}

/// Writes a JSON value as one frame (an error whose id may be `null`,
/// which lsp-server's `Response` cannot carry).
pub fn write_value(out: &mut impl Write, value: &Value) -> std::io::Result<()> {
    let text = value.to_string();
    write!(out, "Content-Length: {}\r\n\r\n{text}", text.len())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<String> {
        let mut r = std::io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            match read(&mut r) {
                Frame::End => return out,
                Frame::Message(m) => out.push(format!(
                    "message {}",
                    serde_json::to_string(&m).unwrap_or_default()
                )),
                Frame::Malformed(Some(v)) => out.push(format!("error {}", v["error"]["code"])),
                Frame::Malformed(None) => out.push("skipped".into()),
            }
        }
    }

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    #[test]
    fn bad_frames_are_answered_and_the_next_one_is_read() {
        let good = r#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let input = [
            frame("{not json"),
            frame(r#"{"jsonrpc":"2.0","id":2}"#),
            frame(r#"{"jsonrpc":"2.0","id":2.5,"method":"x"}"#),
            frame(r#"{"jsonrpc":"2.0","id":3,"result":null}"#),
            "Content-Length: nope\r\n\r\n".into(),
            "Content-Length: 99999999999999999999999\r\n\r\n".into(),
            format!("Content-Length: {}\r\n\r\n", MAX_BODY_BYTES + 1),
        ]
        .concat();
        let seen = frames(input.as_bytes());
        assert_eq!(seen[..3], ["error -32700", "error -32600", "error -32600"]);
        assert!(
            seen[3].starts_with("message"),
            "a response is read: {seen:?}"
        );
        assert_eq!(seen[4..], ["skipped", "skipped"]);
        let mut input = frame("[]").into_bytes();
        input.extend(frame(good).as_bytes());
        let seen = frames(&input);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[1].starts_with("message"), "{seen:?}");
        // A body cut short ends the input; so does a long line with no frame.
        assert_eq!(
            frames(b"Content-Length: 10\r\n\r\n{}"),
            Vec::<String>::new()
        );
        assert_eq!(frames(&vec![b'x'; 100_000]), Vec::<String>::new());
    }
}
