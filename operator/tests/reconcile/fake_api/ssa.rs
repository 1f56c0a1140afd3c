//! Server-side apply's field ownership for the fake API server: the fields two managers'
//! applied configurations both set to different values (a 409 unless the apply is
//! forced), and handing such fields to the forcing manager.

use serde_json::Value;

/// Paths of the fields `mine` sets to a value other than the one `theirs` set. Objects
/// are compared field by field, lists and scalars as a whole (coarser than the API
/// server's list-maps, which is enough to tell a conflict from none).
pub fn conflicts(mine: &Value, theirs: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk(mine, theirs, &mut Vec::new(), &mut out);
    out
}

fn walk(mine: &Value, theirs: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match (mine, theirs) {
        (Value::Object(m), Value::Object(t)) => {
            for (k, mv) in m {
                if let Some(tv) = t.get(k) {
                    at.push(k.clone());
                    walk(mv, tv, at, out);
                    at.pop();
                }
            }
        }
        (m, t) if m != t => out.push(at.clone()),
        _ => {}
    }
}

/// Removes `path` from a manager's applied configuration: it no longer owns the field.
pub fn disown(applied: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = applied;
    for p in parents {
        match node.get_mut(p) {
            Some(n) => node = n,
            None => return,
        }
    }
    if let Some(m) = node.as_object_mut() {
        m.remove(last);
    }
}

/// `.spec.versions`, the way the API server names a field in a conflict.
pub fn field_path(path: &[String]) -> String {
    format!(".{}", path.join("."))
}
