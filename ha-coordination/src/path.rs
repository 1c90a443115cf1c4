//! ZooKeeper path rules: validation, parent and last component.

use super::error::CoordinationError;

/// Checks that `path` is an absolute ZooKeeper path: starts with `/`, no trailing `/` (except
/// the root), no empty, `.` or `..` components, no NUL or control characters.
/// `sequential` allows a trailing `/` (the server appends the sequence number).
pub fn validate_path(path: &str, sequential: bool) -> Result<(), CoordinationError> {
    let bad = |reason| {
        Err(CoordinationError::BadPath {
            path: path.to_string(),
            reason,
        })
    };
    if !path.starts_with('/') {
        return bad("must start with '/'");
    }
    if path == "/" {
        return Ok(());
    }
    let body = if sequential && path.ends_with('/') {
        &path[..path.len() - 1]
    } else {
        path
    };
    if body.ends_with('/') {
        return bad("must not end with '/'");
    }
    if body.chars().any(|c| c == '\0' || c.is_control()) {
        return bad("contains a control character");
    }
    for component in body[1..].split('/') {
        match component {
            "" => return bad("empty component"),
            "." | ".." => return bad("relative component"),
            _ => {}
        }
    }
    Ok(())
}

/// The parent of a valid non-root path (`/a/b` → `/a`, `/a` → `/`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of a valid non-root path (`/a/b` → `b`).
pub fn name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// `parent` joined with `child` (`/` + `a` → `/a`, `/a` + `b` → `/a/b`).
pub fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_and_invalid_paths() {
        for ok in ["/", "/a", "/a/b", "/brokers/ids/1", "/a-b_c.d"] {
            assert!(validate_path(ok, false).is_ok(), "{ok}");
        }
        for bad in ["", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/..", "/a\0b"] {
            assert!(validate_path(bad, false).is_err(), "{bad:?}");
        }
        assert!(validate_path("/seq/", true).is_ok());
        assert!(validate_path("/seq/", false).is_err());
    }

    #[test]
    fn parent_name_join() {
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/a/b/c"), "/a/b");
        assert_eq!(name("/a/b/c"), "c");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
    }
}
