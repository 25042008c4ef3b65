//! One error-chain printer for every front end and log line.

/// `error: cause: cause...` on one line: the whole `source()` chain of `err`.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut msg = err.to_string();
    let mut src = err.source();
    while let Some(e) = src {
        msg.push_str(": ");
        msg.push_str(&e.to_string());
        src = e.source();
    }
    msg
}
