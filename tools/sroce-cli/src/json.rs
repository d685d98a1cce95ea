//! `-j`: JSON output, one array per command on one line, as iproute2's
//! `rdma -j` prints it. A small writer: the tool prints flat objects of
//! strings, numbers and booleans only.

use std::fmt::Write;

/// A JSON object being written.
pub struct Object(String);

impl Object {
    pub fn new() -> Self {
        Object(String::from("{"))
    }

    fn key(&mut self, k: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        push_string(&mut self.0, k);
        self.0.push(':');
    }

    pub fn str(mut self, k: &str, v: &str) -> Self {
        self.key(k);
        push_string(&mut self.0, v);
        self
    }

    pub fn num(mut self, k: &str, v: u64) -> Self {
        self.key(k);
        let _ = write!(self.0, "{v}");
        self
    }

    pub fn bool(mut self, k: &str, v: bool) -> Self {
        self.key(k);
        self.0.push_str(if v { "true" } else { "false" });
        self
    }

    pub fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// The array of `items` (each already JSON).
pub fn array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_and_escapes() {
        let o = Object::new()
            .str("dev", "a\"b\\c\u{1}")
            .num("n", 7)
            .bool("on", false)
            .finish();
        assert_eq!(o, r#"{"dev":"a\"b\\c\u0001","n":7,"on":false}"#);
        assert_eq!(array(&[]), "[]");
        assert_eq!(array(&[o.clone(), o.clone()]), format!("[{o},{o}]"));
    }
}
