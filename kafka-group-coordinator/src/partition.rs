//! Which `__consumer_offsets` partition holds a group.

/// Java's `String.hashCode` over the UTF-16 code units of `s`.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The partition of `__consumer_offsets` that holds `group_id`: Kafka's
/// `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`, where `Utils.abs` is
/// `x & 0x7fffffff` (so `i32::MIN` maps to 0, not to a negative number).
pub fn partition_for(group_id: &str, num_partitions: i32) -> i32 {
    (java_string_hash(group_id) & 0x7fff_ffff) % num_partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_is_java_hash_code_masked_modulo_partitions() {
        // "hello".hashCode() == 99162322 in Java.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs maps it to 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // A negative hash: "Aa-negative" style strings; the mask keeps the result in range.
        for g in ["", "a", "console-consumer-12345", "zzzzzzzzzzzzzzzzzzzz"] {
            let p = partition_for(g, 50);
            assert!((0..50).contains(&p));
            assert_eq!(p, (java_string_hash(g) & 0x7fff_ffff) % 50);
        }
    }
}
