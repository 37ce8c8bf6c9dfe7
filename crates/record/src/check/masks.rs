//! The checker's fast path: JSON's grammar checked 64 bytes at a time with bit masks, with no
//! branch per token.
//!
//! Stage 1 ([`super::Scanner::strings`]) gives, per block, the class of every byte and which
//! bytes lie in strings. Between two tokens of a valid line there is only whitespace, so the
//! grammar comes down to which token may follow which: after `{` a key or `}`; after `[` a value
//! or `]`; after `:` a value; after `,` a key inside an object and a value inside an array; after
//! a key `:`; after any other value `,`, `}` or `]`. For each kind of token this pass shifts the
//! mask of the tokens' ends by one, carries the bits across runs of whitespace with one
//! addition, and checks that they land only on tokens allowed there. What a mask cannot see is
//! handled token by token, for the few tokens that need it: each bracket (to match `}` with `{`
//! and `]` with `[`, and to know where the line is inside an object), each number or literal
//! (its syntax: [`super::check_number`]), and each top-level key the caller may want.
//!
//! The pass answers only "valid" ([`walk_masks`] gives the top-level kind and the wanted
//! values) or "not sure": a malformed line, nesting past [`MAX_DEPTH`], a top-level value that is
//! not an array or object, an escape in a top-level key. The precise walk in [`super`] then
//! decides and says where a line is wrong, so both paths give the same answers on every input
//! (the tests of [`super`] compare them).

use super::{check_literal, check_number, Classify, Found, KeyLengths, Scanner};
use super::{TopLevel, WantedValue};
use crate::limits::MAX_DEPTH;

// Which levels are objects: one bit per level, so the fast path bails out past 64.
const _: () = assert!(MAX_DEPTH < 64);

/// Where the bits of one kind of token end up: the first token after each (past whitespace).
#[derive(Default, Clone, Copy)]
struct Follow {
    /// A token of this kind ended at the previous block's last byte.
    shifted_out: u64,
    /// Whitespace after a token of this kind ran to the end of the previous block.
    rippled_out: u64,
}

impl Follow {
    /// The first byte of the token that follows each token whose last byte is set in `ends`,
    /// given the block's whitespace (outside strings). `after` marks, instead of ends, the byte
    /// just past each token for tokens of more than one byte (numbers): those are included.
    #[inline(always)]
    fn land(&mut self, ends: u64, after: u64, whitespace: u64) -> u64 {
        let next = (ends << 1) | self.shifted_out | after;
        self.shifted_out = ends >> 63;
        if whitespace == 0 && self.rippled_out == 0 {
            return next;
        }
        let next = next | self.rippled_out;
        // a bit at the start of a run of whitespace carries through it to the byte after it
        let (sum, out) = (next & whitespace).overflowing_add(whitespace);
        self.rippled_out = u64::from(out);
        (next | sum) & !whitespace
    }
}

/// A top-level key met in the line, its value not ended yet.
#[derive(Clone, Copy)]
struct Pending {
    name: usize,
    start: usize,
}

/// Checks the line by masks; `Some` when it is valid, with `found` holding the wanted
/// top-level values as the precise walk finds them; `None` when it is not valid or this pass
/// cannot tell (see the module doc).
#[inline(always)]
pub(super) fn walk_masks<K: Classify, W: FnMut(&[u8]) -> Option<usize>>(
    bytes: &[u8],
    lengths: KeyLengths,
    want: &mut W,
    found: &mut Found,
) -> Option<TopLevel> {
    let mut scan = Scanner::<K>::new(bytes);
    let wanted = lengths != KeyLengths::NONE;
    // the lengths of wanted keys that a mask can test (up to 62 bytes), and whether longer
    // ones are wanted (then every top-level key is looked at)
    let short_lengths = lengths.0 & !(1 << 63);
    let long_keys = lengths.0 & 1 << 63 != 0;

    let mut top = None;
    // the levels open: bit d set when level d + 1 is an object
    let (mut levels, mut depth) = (0u64, 0usize);
    // the state at the start of the block: inside an object as the innermost level; at level 1
    let (mut in_object, mut at_level_1) = (false, false);
    // the top-level value has ended: nothing but whitespace may follow
    let mut ended = false;
    let mut bad = 0u64;
    let mut token_carry = 0u64;
    let mut key_carry = false;
    let (mut after_open_object, mut after_open_array) = (Follow::default(), Follow::default());
    let (mut after_value_wanted, mut after_key_wanted) = (Follow::default(), Follow::default());
    let (mut after_key, mut after_value) = (Follow::default(), Follow::default());
    // a top-level key whose string runs past the block: its opening quote
    let mut spanning_key: Option<usize> = None;
    let mut pending: Option<Pending> = None;

    while scan.next_block < bytes.len() {
        let base = scan.next_block;
        let b = scan.strings().ok()?;
        let m = b.masks;
        let close_quote = b.quote & !b.in_string;
        let open_quote = b.quote & b.in_string;
        let outside = !(b.in_string | close_quote);
        let whitespace = m.whitespace & outside;
        let opening = m.opening & outside;
        let closing = m.operator & !(m.opening | m.colon | m.comma) & outside;
        let colon = m.colon & outside;
        let comma = m.comma & outside;
        // the bytes of numbers, literals and garbage; each run's first byte is a token
        let token = outside & !(m.operator | m.whitespace);
        let follows_token = (token << 1) | token_carry;
        token_carry = token >> 63;
        let token_start = token & !follows_token;
        let after_token = follows_token & !token;

        if top.is_none() {
            let first = !m.whitespace;
            if first != 0 {
                // a top-level array or object only: the precise walk reads other values
                let at = first.trailing_zeros();
                if opening >> at & 1 == 0 {
                    return None;
                }
                top = Some(if m.curly >> at & 1 == 1 {
                    TopLevel::Object
                } else {
                    TopLevel::Other("an array")
                });
            }
        }

        // the brackets in order: matched, levels counted, and where the context changes
        let (start_in_object, start_at_level_1) = (in_object, at_level_1);
        let (mut object_flips, mut level_1_flips) = (0u64, 0u64);
        let mut past_top = if ended { !0u64 } else { 0 };
        let mut brackets = opening | closing;
        while brackets != 0 {
            let i = brackets.trailing_zeros();
            brackets &= brackets - 1;
            let curly = m.curly >> i & 1;
            if opening >> i & 1 == 1 {
                if depth == MAX_DEPTH {
                    return None;
                }
                levels = levels & !(1 << depth) | curly << depth;
                depth += 1;
            } else {
                if depth == 0 {
                    return None;
                }
                depth -= 1;
                if levels >> depth & 1 != curly {
                    return None;
                }
                if depth == 0 && !ended {
                    ended = true;
                    past_top = (!0u64 << i) << 1;
                }
            }
            let object = depth > 0 && levels >> (depth.wrapping_sub(1) & 63) & 1 == 1;
            // context is that of the bytes after the bracket: flips take effect at i + 1
            if object != in_object {
                in_object = object;
                object_flips |= (2u64 << i) & !1;
            }
            if (depth == 1) != at_level_1 {
                at_level_1 = depth == 1;
                level_1_flips |= (2u64 << i) & !1;
            }
        }
        let object = K::prefix_xor(object_flips) ^ u64::from(start_in_object).wrapping_neg();
        bad |= !m.whitespace & past_top;

        // what may follow what
        let value_start = open_quote | opening | token_start;
        let comma_in_object = comma & object;
        let after_brace = after_open_object.land(opening & m.curly, 0, whitespace);
        bad |= after_brace & !(open_quote | (closing & m.curly));
        let after_bracket = after_open_array.land(opening & !m.curly, 0, whitespace);
        bad |= after_bracket & !(value_start | (closing & !m.curly));
        let needs_value = after_value_wanted.land(colon | (comma & !object), 0, whitespace);
        bad |= needs_value & !value_start;
        let needs_key = after_key_wanted.land(comma_in_object, 0, whitespace);
        bad |= needs_key & !open_quote;
        // the keys: strings after `{` or after `,` inside an object; one addition carries
        // each key's opening quote through its string to its closing quote
        let key_open = open_quote & (after_brace | needs_key);
        let (sum, carry_1) = key_open.overflowing_add(b.in_string);
        let (sum, carry_2) = sum.overflowing_add(u64::from(key_carry));
        key_carry = carry_1 | carry_2;
        let key_close = sum & !b.in_string;
        let after_keys = after_key.land(key_close, 0, whitespace);
        bad |= after_keys & !colon;
        let value_end = (close_quote & !key_close) | closing;
        let after_values = after_value.land(value_end, after_token, whitespace);
        bad |= after_values & !(comma | closing);

        // numbers and literals, one by one
        let mut tokens = token_start;
        while tokens != 0 {
            let at = base + tokens.trailing_zeros() as usize;
            tokens &= tokens - 1;
            let ok = match bytes.get(at) {
                Some(b'0'..=b'9' | b'-') => check_number(bytes, at).is_ok(),
                Some(b't') => check_literal(bytes, at, b"true").is_ok(),
                Some(b'f') => check_literal(bytes, at, b"false").is_ok(),
                Some(b'n') => check_literal(bytes, at, b"null").is_ok(),
                _ => false,
            };
            if !ok {
                return None;
            }
        }

        if wanted {
            // the keys of a wanted length, at any level; most blocks have none
            let by_length = if long_keys {
                key_open
            } else {
                let mut by_length = 0;
                let mut ls = short_lengths;
                while ls != 0 {
                    let length = ls.trailing_zeros();
                    ls &= ls - 1;
                    by_length |= key_open & (key_close >> (length + 1));
                }
                by_length
            };
            // a key opened in this block runs past it (a key opened before that runs past it too
            // would leave no room for another to open)
            let spans_out = key_carry && key_open != 0;
            let key_bodies = b.in_string & !sum;
            let escaped_key = m.backslash & key_bodies != 0;
            if by_length == 0
                && !spans_out
                && !escaped_key
                && pending.is_none()
                && spanning_key.is_none()
            {
                continue;
            }
            let level_1 = K::prefix_xor(level_1_flips) ^ u64::from(start_at_level_1).wrapping_neg();
            if m.backslash & key_bodies & level_1 != 0 {
                // an escape in a top-level key: its text is not its bytes
                return None;
            }
            let separators = (comma | closing) & level_1;
            let mut meet = |key: usize, close: usize, pending: &mut Option<Pending>| {
                if !lengths.may_hold(close - key - 1) {
                    return;
                }
                if let Some(name) = want(&bytes[key + 1..close]) {
                    let skip = |mut at: usize| {
                        while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
                            at += 1;
                        }
                        at
                    };
                    *pending = Some(Pending { name, start: skip(skip(close + 1) + 1) });
                }
            };
            // the end of a wanted value: the first separator of level 1 after its start
            let end_pending = |pending: &mut Option<Pending>, found: &mut Found, before: u64| {
                if let Some(p) = *pending {
                    let after_start = match p.start.checked_sub(base) {
                        None => !0,
                        Some(from) if from < 64 => (!0u64 << from) << 1,
                        Some(_) => 0,
                    };
                    let ends = separators & after_start & before;
                    if ends != 0 {
                        let end = base + ends.trailing_zeros() as usize;
                        found.push(WantedValue { name: p.name, start: p.start, end });
                        *pending = None;
                    }
                }
            };
            if let Some(key) = spanning_key {
                if key_close != 0 {
                    spanning_key = None;
                    let close = base + key_close.trailing_zeros() as usize;
                    meet(key, close, &mut pending);
                }
            }
            let keys = key_open & level_1;
            let mut candidates = by_length & level_1;
            if spans_out {
                // the block's last key runs past it
                let last = 63 - key_open.leading_zeros();
                if keys >> last & 1 == 1 {
                    spanning_key = Some(base + last as usize);
                    candidates &= !(1 << last);
                }
            }
            while candidates != 0 {
                let i = candidates.trailing_zeros();
                candidates &= candidates - 1;
                end_pending(&mut pending, found, !(!0u64 << i));
                let closes = key_close & ((!0u64 << i) << 1);
                if closes != 0 {
                    meet(base + i as usize, base + closes.trailing_zeros() as usize, &mut pending);
                }
            }
            end_pending(&mut pending, found, !0);
        }
    }
    if bad != 0 || depth != 0 || !ended || pending.is_some() || spanning_key.is_some() {
        return None;
    }
    top
}

#[cfg(test)]
mod tests {
    use super::super::{walk_precise, DepthRule, Kernel, Portable};
    use super::*;
    use proptest::prelude::*;

    /// The keys the tests want: the empty key, every key of one byte, keys of two bytes that
    /// start with `a`, and keys of 63 bytes and more.
    fn want(key: &[u8]) -> Option<usize> {
        match key.len() {
            0 => Some(0),
            1 => Some(1),
            2 if key[0] == b'a' => Some(2),
            63.. => Some(3),
            _ => None,
        }
    }

    const WANTED: KeyLengths = KeyLengths(1 | 1 << 1 | 1 << 2 | 1 << 63);

    /// The fast path's answer with `kernel`.
    fn fast(kernel: Kernel, bytes: &[u8], lengths: KeyLengths) -> Option<(TopLevel, Found)> {
        let mut found = Found::new();
        let mut want = want;
        let top = match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                walk_masks::<super::super::Avx512, _>(bytes, lengths, &mut want, &mut found)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                walk_masks::<super::super::Avx2, _>(bytes, lengths, &mut want, &mut found)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Sse2 => {
                walk_masks::<super::super::Sse2, _>(bytes, lengths, &mut want, &mut found)
            }
            _ => walk_masks::<Portable, _>(bytes, lengths, &mut want, &mut found),
        };
        top.map(|top| (top, found))
    }

    /// Whatever the fast path says valid, the precise walk says valid, with the same values
    /// found; and every line the fast path is meant for that the precise walk accepts, the fast
    /// path accepts.
    fn agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
        for lengths in [KeyLengths::NONE, WANTED] {
            let mut found = Found::new();
            let precise = walk_precise::<Portable, _>(
                bytes,
                DepthRule::Everywhere,
                lengths,
                want,
                &mut found,
            );
            let first = bytes.iter().find(|b| !b" \t\n\r".contains(b));
            let meant = precise.is_ok()
                && matches!(first, Some(b'{' | b'['))
                && (lengths == KeyLengths::NONE || !bytes.contains(&b'\\'));
            for kernel in Kernel::available() {
                match fast(kernel, bytes, lengths) {
                    Some((top, fast_found)) => {
                        prop_assert_eq!(
                            &precise,
                            &Ok(top),
                            "{:?} on {:?}",
                            kernel,
                            String::from_utf8_lossy(bytes)
                        );
                        prop_assert_eq!(
                            &fast_found,
                            &found,
                            "{:?} on {:?}",
                            kernel,
                            String::from_utf8_lossy(bytes)
                        );
                    }
                    None => prop_assert!(
                        !meant,
                        "{:?} gave up on a line the precise walk accepts: {:?}",
                        kernel,
                        String::from_utf8_lossy(bytes)
                    ),
                }
            }
        }
        Ok(())
    }

    #[test]
    fn valid_lines_are_accepted_by_masks_alone() {
        let lines: &[&[u8]] = &[
            br#"{}"#,
            br#"[]"#,
            br#"{"a":1}"#,
            br#" { "a" : [ 1 , -2.5e-3 , true , false , null , "x" ] , "b" : { } } "#,
            br#"{"":{"":[]},"ab":"\"","a":"y","x":[[],[{}]]}"#,
            br#"[1,"a",{"a":[true]},null]"#,
        ];
        for line in lines {
            for kernel in Kernel::available() {
                assert!(
                    fast(kernel, line, WANTED).is_some(),
                    "{kernel:?} {}",
                    String::from_utf8_lossy(line)
                );
            }
            agrees(line).unwrap();
        }
    }

    #[test]
    fn malformed_lines_are_not_accepted() {
        let lines: &[&[u8]] = &[
            br#"{"a":1,}"#,
            br#"{"a":[1,2,]}"#,
            br#"{"a" 1}"#,
            br#"{"a":1 "b":2}"#,
            br#"{1:2}"#,
            br#"{"a":01}"#,
            br#"{"a":1}}"#,
            br#"{"a":1} {"#,
            br#"{"a":1},"#,
            br#"{"a":1"#,
            br#"["a":1]"#,
            br#"{"a":[}"#,
            br#"{"a":{]}"#,
            br#"[1:2]"#,
            br#"{,}"#,
            br#"[,1]"#,
            br#"{"a":1:2}"#,
            br#"{"a"::1}"#,
            br#"{"a":}"#,
            br#"{"a"}"#,
            br#"{"a",1}"#,
            br#"[{}{}]"#,
            br#"[""""]"#,
            br#"{"a":"b"c}"#,
            b"{\"a\":1}\x00",
        ];
        for line in lines {
            for kernel in Kernel::available() {
                assert!(
                    fast(kernel, line, WANTED).is_none(),
                    "{kernel:?} {}",
                    String::from_utf8_lossy(line)
                );
            }
            agrees(line).unwrap();
        }
    }

    /// Keys and values of every length at every offset across block boundaries, with and
    /// without whitespace between the tokens.
    #[test]
    fn wanted_values_are_found_across_blocks() {
        for pad in 0..70 {
            for key in [0usize, 1, 2, 3, 62, 63, 64, 130] {
                for ws in ["", " ", "\n \t", &" ".repeat(70)] {
                    let key_text = if key == 2 { "ab".to_owned() } else { "k".repeat(key) };
                    let line = format!(
                        r#"{{"p":"{}",{ws}"{key_text}"{ws}:{ws}[1,{{"a":2}}]{ws},"a":{ws}"{}"{ws},"z":-1.5e3{ws}}}"#,
                        "x".repeat(pad),
                        "v".repeat(pad),
                    );
                    assert!(fast(Kernel::detect(), line.as_bytes(), WANTED).is_some(), "{line}");
                    agrees(line.as_bytes()).unwrap();
                }
            }
        }
    }

    fn line() -> impl Strategy<Value = String> {
        let key = prop_oneof!["[a-z]{0,3}", "[a-z]{60,70}", Just("a\\u0062".to_owned())];
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,3})?([eE][-+]?[0-9]{1,3})?",
            "\"([a-z{}\\[\\]:, ]|\\\\\"){0,80}\"",
        ];
        let ws = prop_oneof![
            Just(String::new()),
            Just(" ".to_owned()),
            Just("\n\t".to_owned()),
            "[ ]{0,70}"
        ];
        let value = leaf.prop_recursive(4, 40, 6, move |inner| {
            let entry = (key.clone(), ws.clone(), inner.clone())
                .prop_map(|(k, w, v)| format!("{w}\"{k}\"{w}:{w}{v}{w}"));
            prop_oneof![
                prop::collection::vec(inner, 0..6)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec(entry, 0..8).prop_map(|e| format!("{{{}}}", e.join(","))),
            ]
        });
        value.prop_map(|v| if v.starts_with(['{', '[']) { v } else { format!("[{v}]") })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn masks_agree_with_the_precise_walk_on_valid_lines(text in line()) {
            agrees(text.as_bytes())?;
        }

        #[test]
        fn masks_agree_with_the_precise_walk_on_damaged_lines(
            text in line(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<u8>()), 1..4),
        ) {
            let bytes = super::super::tests::damaged(text.as_bytes(), &edits);
            agrees(&bytes)?;
        }
    }
}
