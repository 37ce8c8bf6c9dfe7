//! needle's own whole-line JSON checker: decides whether a line is valid JSON under the rules of
//! [`crate::decode`] (the same accept/reject decision as [`crate::decode_value`]) and, in the
//! same walk, finds the byte range of each top-level value whose key a caller wants, so that only
//! those values are built ([`crate::FieldSet::decode`] in [`crate::Validation::Line`]).
//!
//! Two stages, in the manner of simdjson (the code is needle's own):
//! - **Stage 1**, per 64-byte block, with SIMD ([`Kernel::Avx512`] or [`Kernel::Avx2`], picked
//!   at run time, or [`Kernel::Sse2`]; [`Kernel::Portable`] elsewhere, all giving identical
//!   masks):
//!   classify every byte (quote, backslash, `{}[]:,`, whitespace, control, non-ASCII), resolve
//!   backslash escapes (carried across blocks, each escape checked as it is met: `\uXXXX`,
//!   surrogate pairs), find which bytes lie inside strings (a prefix XOR of the unescaped
//!   quotes), reject control characters inside strings, and mark the *structural starts*: the
//!   brackets, colons and commas outside strings, the opening quote of each string, and the
//!   first byte of each other token (numbers, `true`, `false`, `null`, or garbage). UTF-8 is
//!   checked once per line, with `simdutf8`, only when a byte ≥ 0x80 was seen.
//! - **Stage 2** pulls the structural starts in order (stage 1 classifies a block when stage 2
//!   has read the previous one's) and checks the grammar with an explicit stack (no
//!   recursion): objects, arrays, keys, colons, commas, nesting depth, numbers (JSON's syntax,
//!   and the range rule: a number too large for a double is malformed), literals, and that
//!   nothing but whitespace follows the value. Every byte of a line is then covered: a byte
//!   outside strings is whitespace, a structural character, or part of a token whose start stage
//!   2 parses to its end and whose next byte must be whitespace, `,`, `]`, `}` or the end.
//!   For the top-level object it records, as it goes, each wanted key's value range (from the
//!   value's first byte up to the `,` or `}` after it).
//!
//! Stage 2 has two forms. The fast one (the `masks` module, tried first) checks the grammar
//! with bit masks, 64 bytes at a time, and can only say "valid" or "not sure"; the
//! token-by-token walk above (`walk_precise`) then decides, and says where a line is wrong. Both give the same
//! verdicts and find the same values (the tests of both modules compare them).
//!
//! The checker builds no values; [`crate::decode`] builds the wanted ones from their ranges.
//! Every failure is a [`RecordError`] (never a panic), with the byte offset where the checker
//! stopped.

use crate::limits::{FAST_SKIP_MAX_OPENINGS, MAX_DEPTH, STREAM_MAX_BYTES};
use crate::RecordError;

mod flat;
mod masks;
pub(crate) use flat::walk_flat;
use smallvec::SmallVec;

/// Which code classifies the bytes of a block in stage 1. Every kernel gives the same answers;
/// [`Kernel::detect`] picks the fastest the CPU has. Tests and benches may force one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// The whole 64-byte block at a time (x86-64 CPUs with AVX-512 BW and PCLMULQDQ, detected at
    /// run time).
    Avx512,
    /// 32 bytes at a time (x86-64 CPUs with AVX2 and PCLMULQDQ, detected at run time).
    Avx2,
    /// 16 bytes at a time (every x86-64 CPU).
    Sse2,
    /// A byte at a time through a lookup table (any CPU).
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    #[inline]
    pub fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            let clmul = std::arch::is_x86_feature_detected!("pclmulqdq");
            if std::arch::is_x86_feature_detected!("avx512bw") && clmul {
                return Kernel::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") && clmul {
                return Kernel::Avx2;
            }
            Kernel::Sse2
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Kernel::Portable
        }
    }

    /// Every kernel this CPU runs, the fastest first.
    pub fn available() -> Vec<Kernel> {
        let mut kernels = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            let clmul = std::arch::is_x86_feature_detected!("pclmulqdq");
            if std::arch::is_x86_feature_detected!("avx512bw") && clmul {
                kernels.push(Kernel::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2") && clmul {
                kernels.push(Kernel::Avx2);
            }
            kernels.push(Kernel::Sse2);
        }
        kernels.push(Kernel::Portable);
        kernels
    }
}

/// Checks that `bytes` is one valid JSON value (any kind) under the rules of [`crate::decode`]:
/// it fails exactly when [`crate::decode_value`] fails, with [`RecordError::Malformed`].
pub fn check(bytes: &[u8]) -> Result<(), RecordError> {
    check_with(Kernel::detect(), bytes)
}

/// [`check`] with the stage-1 kernel chosen by the caller (a kernel the CPU lacks falls back to
/// the one it has: [`Kernel::detect`]'s).
pub fn check_with(kernel: Kernel, bytes: &[u8]) -> Result<(), RecordError> {
    let mut found = Found::new();
    walk(kernel, bytes, DepthRule::Everywhere, KeyLengths::NONE, |_| None, &mut found).map(drop)
}

/// How deep values that are not built may nest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DepthRule {
    /// Every array and object at most [`MAX_DEPTH`] levels deep, as [`crate::decode_value`].
    Everywhere,
    /// The decision [`crate::Validation::Line`] has always made: [`MAX_DEPTH`] everywhere in a
    /// line of at most [`STREAM_MAX_BYTES`] or with more than [`FAST_SKIP_MAX_OPENINGS`] `{` and
    /// `[` bytes; in other lines (read by sonic-rs's tree before this checker) values that are
    /// not built may nest deeper (the brackets bound them: at most 256 levels).
    LineMode,
}

/// A wanted top-level value: which name (the caller's index), and its bytes `start..end` in
/// the line (from its first byte to the `,` or `}` after it, so it may end with whitespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WantedValue {
    pub name: usize,
    pub start: usize,
    pub end: usize,
}

/// The wanted values of a line, in the order of the line (a key met twice, twice).
pub(crate) type Found = SmallVec<[WantedValue; 8]>;

/// The lengths of the keys a caller wants (bit `n` for `n` bytes, bit 63 for 63 and more):
/// the walk asks about no key of another length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyLengths(u64);

impl KeyLengths {
    pub const NONE: KeyLengths = KeyLengths(0);

    /// The lengths of `keys`.
    pub fn of<'k>(keys: impl IntoIterator<Item = &'k [u8]>) -> KeyLengths {
        KeyLengths(keys.into_iter().fold(0, |bits, key| bits | 1 << key.len().min(63)))
    }

    #[inline(always)]
    fn may_hold(self, length: usize) -> bool {
        self.0 & (1 << length.min(63)) != 0
    }
}

/// What the line's top-level value is, when the line is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TopLevel {
    Object,
    Other(&'static str),
}

/// Checks the line and, when its top-level value is an object, pushes onto `found` the range of
/// each value whose key `want` maps to a name. `found` is cleared first. `want` is given each
/// top-level key's text (escapes decoded) whose length is in `lengths`, as bytes: UTF-8 unless
/// the line is malformed, which the walk then reports whatever `want` answered.
pub(crate) fn walk<W: FnMut(&[u8]) -> Option<usize>>(
    kernel: Kernel,
    bytes: &[u8],
    depth_rule: DepthRule,
    lengths: KeyLengths,
    want: W,
    found: &mut Found,
) -> Result<TopLevel, RecordError> {
    found.clear();
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512
            if std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("pclmulqdq") =>
        {
            // SAFETY: the CPU has AVX-512 BW (detected on the line above), all walk_avx512
            // requires.
            unsafe { walk_avx512(bytes, depth_rule, lengths, want, found) }
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 | Kernel::Avx2
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("pclmulqdq") =>
        {
            // SAFETY: the CPU has AVX2 (detected on the line above), all walk_avx2 requires.
            unsafe { walk_avx2(bytes, depth_rule, lengths, want, found) }
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 | Kernel::Avx2 | Kernel::Sse2 => {
            walk_generic::<Sse2, W>(bytes, depth_rule, lengths, want, found)
        }
        _ => walk_generic::<Portable, W>(bytes, depth_rule, lengths, want, found),
    }
}

/// The walk compiled with AVX-512 BW enabled, so that the kernel's intrinsics inline into it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx2,pclmulqdq")]
fn walk_avx512<W: FnMut(&[u8]) -> Option<usize>>(
    bytes: &[u8],
    depth_rule: DepthRule,
    lengths: KeyLengths,
    want: W,
    found: &mut Found,
) -> Result<TopLevel, RecordError> {
    walk_generic::<Avx512, W>(bytes, depth_rule, lengths, want, found)
}

/// The walk compiled with AVX2 enabled, so that the kernel's intrinsics inline into it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,pclmulqdq")]
fn walk_avx2<W: FnMut(&[u8]) -> Option<usize>>(
    bytes: &[u8],
    depth_rule: DepthRule,
    lengths: KeyLengths,
    want: W,
    found: &mut Found,
) -> Result<TopLevel, RecordError> {
    walk_generic::<Avx2, W>(bytes, depth_rule, lengths, want, found)
}

// ---------------------------------------------------------------------------------------------
// Stage 1: classifying a block's bytes.

/// One bit per byte of a 64-byte block, bit `i` for byte `i`, per class.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    /// `{ } [ ] : ,`
    operator: u64,
    /// space, tab, line feed, carriage return
    whitespace: u64,
    /// bytes below 0x20
    control: u64,
    /// bytes of 0x80 and above (not ASCII)
    high: u64,
    /// `{` and `[`
    opening: u64,
    /// `:`
    colon: u64,
    /// `,`
    comma: u64,
    /// `{` and `}` (the brackets of objects)
    curly: u64,
}

impl Masks {
    /// The masks of bytes `by..64` moved down to `0..64 - by` (`by` in 1..64), the bytes above
    /// them classified as spaces: a line's last partial block, read as the line's last 64 bytes.
    #[inline(always)]
    fn shifted_down(self, by: u32) -> Masks {
        Masks {
            quote: self.quote >> by,
            backslash: self.backslash >> by,
            operator: self.operator >> by,
            whitespace: self.whitespace >> by | !(!0u64 >> by),
            control: self.control >> by,
            high: self.high >> by,
            opening: self.opening >> by,
            colon: self.colon >> by,
            comma: self.comma >> by,
            curly: self.curly >> by,
        }
    }
}

/// Classifies the 64 bytes of a block.
trait Classify {
    fn classify(block: &[u8; 64]) -> Masks;

    /// Classifies the last bytes of `line`, from `start` (fewer than 64), as a block padded
    /// with spaces (whitespace: no effect). A line of 64 bytes or more: its last 64 bytes,
    /// classified and shifted down, the padding marked as whitespace (a copy into a padded
    /// buffer would be reloaded whole from the copy's smaller stores, which store forwarding
    /// cannot serve: a stall on every line).
    #[inline(always)]
    fn classify_tail(line: &[u8], start: usize) -> Masks {
        let rest = line.len() - start;
        match line.len().checked_sub(64).map(|from| &line[from..]).and_then(<[u8]>::first_chunk) {
            Some(last) => Self::classify(last).shifted_down(64 - rest as u32),
            None => {
                let mut block = [b' '; 64];
                block[..rest].copy_from_slice(&line[start..]);
                Self::classify(&block)
            }
        }
    }

    /// [`prefix_xor`], with the CPU's carry-less multiply where the kernel's CPUs have one.
    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        prefix_xor(x)
    }
}

/// Byte classes of the portable kernel's table.
const QUOTE: u16 = 1;
const BACKSLASH: u16 = 2;
const OPERATOR: u16 = 4;
const WHITESPACE: u16 = 8;
const CONTROL: u16 = 16;
const HIGH: u16 = 32;
const OPENING: u16 = 64;
const COLON: u16 = 128;
const COMMA: u16 = 256;
const CURLY: u16 = 512;

const CLASSES: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut b = 0;
    while b < 256 {
        let mut class = 0;
        if b < 0x20 {
            class |= CONTROL;
        }
        if b >= 0x80 {
            class |= HIGH;
        }
        match b as u8 {
            b'"' => class |= QUOTE,
            b'\\' => class |= BACKSLASH,
            b'{' => class |= OPERATOR | OPENING | CURLY,
            b'[' => class |= OPERATOR | OPENING,
            b'}' => class |= OPERATOR | CURLY,
            b':' => class |= OPERATOR | COLON,
            b',' => class |= OPERATOR | COMMA,
            b']' => class |= OPERATOR,
            b' ' | b'\t' | b'\n' | b'\r' => class |= WHITESPACE,
            _ => {}
        }
        table[b] = class;
        b += 1;
    }
    table
};

/// A byte at a time, through [`CLASSES`].
struct Portable;

impl Classify for Portable {
    #[inline(always)]
    fn classify(block: &[u8; 64]) -> Masks {
        let mut m = Masks::default();
        for (i, &b) in block.iter().enumerate() {
            let class = CLASSES[b as usize];
            let bit = |c: u16| u64::from(class & c != 0) << i;
            m.quote |= bit(QUOTE);
            m.backslash |= bit(BACKSLASH);
            m.operator |= bit(OPERATOR);
            m.whitespace |= bit(WHITESPACE);
            m.control |= bit(CONTROL);
            m.high |= bit(HIGH);
            m.opening |= bit(OPENING);
            m.colon |= bit(COLON);
            m.comma |= bit(COMMA);
            m.curly |= bit(CURLY);
        }
        m
    }
}

#[cfg(target_arch = "x86_64")]
struct Sse2;

#[cfg(target_arch = "x86_64")]
impl Classify for Sse2 {
    #[inline(always)]
    fn classify(block: &[u8; 64]) -> Masks {
        // SAFETY: SSE2 is part of x86-64, so every x86-64 CPU runs classify_sse2.
        unsafe { classify_sse2(block) }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn classify_sse2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = Masks::default();
    for (i, chunk) in block.chunks_exact(16).enumerate() {
        // SAFETY: `chunk` is 16 readable bytes; the load is unaligned.
        let x = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
        // macros, not closures: a closure would not inherit this function's target features
        macro_rules! is {
            ($c:expr) => {
                _mm_cmpeq_epi8(x, _mm_set1_epi8($c as i8))
            };
        }
        // `[` | 0x20 is `{` and `]` | 0x20 is `}`; no other byte maps to either
        let folded = _mm_or_si128(x, _mm_set1_epi8(0x20));
        let opening = _mm_cmpeq_epi8(folded, _mm_set1_epi8(b'{' as i8));
        let closing = _mm_cmpeq_epi8(folded, _mm_set1_epi8(b'}' as i8));
        let (colon, comma) = (is!(b':'), is!(b','));
        let curly = _mm_or_si128(is!(b'{'), is!(b'}'));
        let operator = _mm_or_si128(_mm_or_si128(opening, closing), _mm_or_si128(colon, comma));
        let whitespace =
            _mm_or_si128(_mm_or_si128(is!(b' '), is!(b'\t')), _mm_or_si128(is!(b'\n'), is!(b'\r')));
        // x <= 0x1f exactly when max(x, 0x1f) == 0x1f (unsigned)
        let limit = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(x, limit), limit);
        let shift = 16 * i;
        macro_rules! bits {
            ($v:expr) => {
                u64::from(_mm_movemask_epi8($v) as u16) << shift
            };
        }
        m.quote |= bits!(is!(b'"'));
        m.backslash |= bits!(is!(b'\\'));
        m.operator |= bits!(operator);
        m.whitespace |= bits!(whitespace);
        m.control |= bits!(control);
        m.high |= bits!(x);
        m.opening |= bits!(opening);
        m.colon |= bits!(colon);
        m.comma |= bits!(comma);
        m.curly |= bits!(curly);
    }
    m
}

#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Classify for Avx2 {
    #[inline(always)]
    fn classify(block: &[u8; 64]) -> Masks {
        // SAFETY: this kernel is only used by walk_avx2, which runs only on CPUs detected to
        // have AVX2.
        unsafe { classify_avx2(block) }
    }

    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        // SAFETY: every CPU with AVX2 has PCLMULQDQ, and walk_avx2 checks for both.
        unsafe { prefix_xor_clmul(x) }
    }
}

// Not inlined: inlined into the walk, LLVM fuses the two 32-byte movemasks of each class into
// one 64-lane mask, which AVX2 lacks, and extracts it byte by byte (measured: the AVX2 kernel
// then ran slower than the portable one).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
fn classify_avx2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = Masks::default();
    for (i, chunk) in block.chunks_exact(32).enumerate() {
        // SAFETY: `chunk` is 32 readable bytes; the load is unaligned.
        let x = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
        // macros, not closures: a closure would not inherit this function's target features
        macro_rules! is {
            ($c:expr) => {
                _mm256_cmpeq_epi8(x, _mm256_set1_epi8($c as i8))
            };
        }
        // `[` | 0x20 is `{` and `]` | 0x20 is `}`; no other byte maps to either
        let folded = _mm256_or_si256(x, _mm256_set1_epi8(0x20));
        let opening = _mm256_cmpeq_epi8(folded, _mm256_set1_epi8(b'{' as i8));
        let closing = _mm256_cmpeq_epi8(folded, _mm256_set1_epi8(b'}' as i8));
        let (colon, comma) = (is!(b':'), is!(b','));
        let curly = _mm256_or_si256(is!(b'{'), is!(b'}'));
        let operator =
            _mm256_or_si256(_mm256_or_si256(opening, closing), _mm256_or_si256(colon, comma));
        let whitespace = _mm256_or_si256(
            _mm256_or_si256(is!(b' '), is!(b'\t')),
            _mm256_or_si256(is!(b'\n'), is!(b'\r')),
        );
        // x <= 0x1f exactly when max(x, 0x1f) == 0x1f (unsigned)
        let limit = _mm256_set1_epi8(0x1f);
        let control = _mm256_cmpeq_epi8(_mm256_max_epu8(x, limit), limit);
        let shift = 32 * i;
        macro_rules! bits {
            ($v:expr) => {
                u64::from(_mm256_movemask_epi8($v) as u32) << shift
            };
        }
        m.quote |= bits!(is!(b'"'));
        m.backslash |= bits!(is!(b'\\'));
        m.operator |= bits!(operator);
        m.whitespace |= bits!(whitespace);
        m.control |= bits!(control);
        m.high |= bits!(x);
        m.opening |= bits!(opening);
        m.colon |= bits!(colon);
        m.comma |= bits!(comma);
        m.curly |= bits!(curly);
    }
    m
}

#[cfg(target_arch = "x86_64")]
struct Avx512;

#[cfg(target_arch = "x86_64")]
impl Classify for Avx512 {
    #[inline(always)]
    fn classify(block: &[u8; 64]) -> Masks {
        // SAFETY: this kernel is only used by walk_avx512, which runs only on CPUs detected to
        // have AVX-512 BW; `block` is 64 readable bytes, and the load is unaligned.
        unsafe { classify_avx512(std::arch::x86_64::_mm512_loadu_si512(block.as_ptr().cast())) }
    }

    /// One masked load, whatever the line's length.
    #[inline(always)]
    fn classify_tail(line: &[u8], start: usize) -> Masks {
        use std::arch::x86_64::*;
        let rest = &line[start..];
        debug_assert!(rest.len() < 64);
        let wanted = (1u64 << rest.len()) - 1;
        // SAFETY: as for `classify`; the masked load reads only the `rest.len()` bytes of
        // `rest` (a masked-off byte is never accessed, so it cannot fault) and puts spaces in
        // the others.
        unsafe {
            let spaces = _mm512_set1_epi8(b' ' as i8);
            classify_avx512(_mm512_mask_loadu_epi8(spaces, wanted, rest.as_ptr().cast()))
        }
    }

    #[inline(always)]
    fn prefix_xor(x: u64) -> u64 {
        // SAFETY: walk_avx512 runs only on CPUs detected to have PCLMULQDQ.
        unsafe { prefix_xor_clmul(x) }
    }
}

/// [`prefix_xor`] as one carry-less multiplication by all ones.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq,sse2")]
#[inline]
fn prefix_xor_clmul(x: u64) -> u64 {
    use std::arch::x86_64::*;
    let product = _mm_clmulepi64_si128(_mm_set_epi64x(0, x as i64), _mm_set1_epi8(-1), 0);
    _mm_cvtsi128_si64(product) as u64
}

/// The whole block, in one register: each class is one compare straight into a 64-bit mask.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn classify_avx512(x: std::arch::x86_64::__m512i) -> Masks {
    use std::arch::x86_64::*;
    macro_rules! is {
        ($c:expr) => {
            _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8($c as i8))
        };
    }
    // `[` | 0x20 is `{` and `]` | 0x20 is `}`; no other byte maps to either
    let folded = _mm512_or_si512(x, _mm512_set1_epi8(0x20));
    let opening = _mm512_cmpeq_epi8_mask(folded, _mm512_set1_epi8(b'{' as i8));
    let closing = _mm512_cmpeq_epi8_mask(folded, _mm512_set1_epi8(b'}' as i8));
    let (colon, comma) = (is!(b':'), is!(b','));
    // of the brackets, those with bit 0x20 set are `{` and `}`
    let curly = (opening | closing) & _mm512_test_epi8_mask(x, _mm512_set1_epi8(0x20));
    Masks {
        quote: is!(b'"'),
        backslash: is!(b'\\'),
        operator: opening | closing | colon | comma,
        whitespace: is!(b' ') | is!(b'\t') | is!(b'\n') | is!(b'\r'),
        control: _mm512_cmplt_epu8_mask(x, _mm512_set1_epi8(0x20)),
        high: _mm512_movepi8_mask(x),
        opening,
        colon,
        comma,
        curly,
    }
}

/// Bit `i` of the result is the XOR of bits `0..=i` of `x`: with `x` the quotes of a block,
/// the bytes from an opening quote up to (not including) its closing quote.
#[inline(always)]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

fn malformed(offset: usize, message: &str) -> RecordError {
    RecordError::Malformed { message: message.to_owned(), offset: Some(offset) }
}

/// A block's bytes classified, and its strings found.
#[derive(Debug, Clone, Copy)]
struct Strings {
    masks: Masks,
    /// The quotes that are not escaped: each opens or closes a string.
    quote: u64,
    /// The bytes of strings from each opening quote up to (not including) its closing quote.
    in_string: u64,
}

/// Stage 1 over a line, block by block, as stage 2 asks for the next block's starts.
struct Scanner<'a, K> {
    bytes: &'a [u8],
    /// Offset of the next block to classify.
    next_block: usize,
    /// The last byte of the previous block was an escaping backslash.
    escape_carry: bool,
    /// All ones when the previous block ended inside a string.
    in_string_carry: u64,
    /// 1 when the previous block ended with a byte of a token other than a string.
    token_carry: u64,
    /// The backslash of the low half of a surrogate pair already checked with its high half.
    pair_low_at: usize,
    /// Some byte ≥ 0x80 was seen.
    high: u64,
    /// Some backslash was seen.
    backslashes: bool,
    /// `{` and `[` bytes seen, inside strings or not.
    openings: usize,
    /// What stage 1 found wrong, once it did.
    error: Option<RecordError>,
    _kernel: std::marker::PhantomData<K>,
}

impl<'a, K: Classify> Scanner<'a, K> {
    fn new(bytes: &'a [u8]) -> Self {
        Scanner {
            bytes,
            next_block: 0,
            escape_carry: false,
            in_string_carry: 0,
            token_carry: 0,
            pair_low_at: usize::MAX,
            high: 0,
            backslashes: false,
            openings: 0,
            error: None,
            _kernel: std::marker::PhantomData,
        }
    }

    /// Classifies the next block: its structural starts and its offset; `None` past the last
    /// block, or once stage 1 found an error (kept for [`Scanner::failure`]). Stage 2 keeps the
    /// starts it has not read yet in a local (a register), not here.
    #[inline]
    fn refill(&mut self) -> Option<(u64, usize)> {
        if self.next_block >= self.bytes.len() {
            return None;
        }
        let start = self.next_block;
        match self.advance() {
            Ok(starts) => Some((starts, start)),
            Err(e) => {
                self.error = Some(e);
                self.next_block = self.bytes.len();
                None
            }
        }
    }

    /// The error to report where stage 2 met the end of the line while reading `context`:
    /// stage 1's error, when it stopped the line short.
    #[cold]
    fn failure(&mut self, context: &str) -> RecordError {
        self.error.take().unwrap_or_else(|| malformed(self.bytes.len(), context))
    }

    /// Classifies the next block and gives its structural starts.
    #[inline]
    fn advance(&mut self) -> Result<u64, RecordError> {
        let b = self.strings()?;
        // bytes of tokens other than strings (numbers, literals, garbage): each run's first
        // byte is a start; strings start at their opening quote
        let token = !(b.masks.operator | b.masks.whitespace);
        let unquoted_token = token & !b.quote;
        let follows_token = (unquoted_token << 1) | self.token_carry;
        self.token_carry = unquoted_token >> 63;
        // inside strings: from the byte after the opening quote to the closing quote
        let string_tail = b.in_string ^ b.quote;
        let starts = (b.masks.operator | (token & !follows_token)) & !string_tail;
        self.openings += b.masks.opening.count_ones() as usize;
        Ok(starts)
    }

    /// Classifies the next block (there must be one) and finds its strings: escapes resolved
    /// and checked, control characters inside strings rejected; at the line's last block, the
    /// checks of [`Scanner::finish`].
    #[inline(always)]
    fn strings(&mut self) -> Result<Strings, RecordError> {
        let start = self.next_block;
        let masks = match self.bytes[start..].first_chunk::<64>() {
            Some(block) => K::classify(block),
            None => K::classify_tail(self.bytes, start),
        };
        let escaped = if masks.backslash == 0 && !self.escape_carry {
            0
        } else {
            self.backslashes = true;
            self.escapes(start, masks.backslash)?
        };
        let quote = masks.quote & !escaped;
        let in_string = K::prefix_xor(quote) ^ self.in_string_carry;
        self.in_string_carry = ((in_string as i64) >> 63) as u64;
        // inside strings: from the byte after the opening quote to the closing quote
        let inside = in_string & !quote;
        if masks.control & inside != 0 {
            let at = start + (masks.control & inside).trailing_zeros() as usize;
            return Err(malformed(at, "control character (below 0x20) inside a string"));
        }
        self.high |= masks.high;
        self.next_block = start + 64;
        if self.next_block >= self.bytes.len() {
            self.finish()?;
        }
        Ok(Strings { masks, quote, in_string })
    }

    /// The checks that need the whole line: strings closed, UTF-8.
    fn finish(&mut self) -> Result<(), RecordError> {
        if self.in_string_carry != 0 || self.escape_carry {
            return Err(malformed(self.bytes.len(), "EOF while parsing a string"));
        }
        if self.high != 0 && simdutf8::basic::from_utf8(self.bytes).is_err() {
            let at = std::str::from_utf8(self.bytes).err().map_or(0, |e| e.valid_up_to());
            return Err(malformed(at, "invalid UTF-8"));
        }
        Ok(())
    }

    /// The bytes of the block at `start` that a backslash escapes, checking each escape.
    /// Backslashes are rare, so they are walked one by one. Escapes are read from the left
    /// across the whole line, inside strings or not: a backslash outside a string is an error
    /// anyway, and inside strings this reads them as a JSON reader does.
    #[inline(never)]
    fn escapes(&mut self, start: usize, backslashes: u64) -> Result<u64, RecordError> {
        let mut escaped = 0;
        let mut pending = backslashes;
        if self.escape_carry {
            escaped |= 1;
            pending &= !1;
            self.escape_carry = false;
        }
        while pending != 0 {
            let i = pending.trailing_zeros() as usize;
            self.check_escape(start + i)?;
            if i == 63 {
                self.escape_carry = true;
                pending = 0;
            } else {
                escaped |= 1 << (i + 1);
                pending &= !(3 << i);
            }
        }
        Ok(escaped)
    }

    /// Checks the escape whose backslash is at `at`.
    fn check_escape(&mut self, at: usize) -> Result<(), RecordError> {
        match self.bytes.get(at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(()),
            Some(b'u') if at == self.pair_low_at => Ok(()),
            Some(b'u') => match hex4(self.bytes, at + 2) {
                Some(0xD800..=0xDBFF) => {
                    // a high surrogate: the low half must follow as `\uDC00`..`\uDFFF`
                    let low = match self.bytes.get(at + 6..at + 8) {
                        Some(b"\\u") => hex4(self.bytes, at + 8),
                        _ => None,
                    };
                    match low {
                        Some(0xDC00..=0xDFFF) => {
                            self.pair_low_at = at + 6;
                            Ok(())
                        }
                        _ => Err(malformed(
                            at + 6,
                            "lone leading surrogate in a \\u escape (no low half follows)",
                        )),
                    }
                }
                Some(0xDC00..=0xDFFF) => {
                    Err(malformed(at, "lone trailing surrogate in a \\u escape"))
                }
                Some(_) => Ok(()),
                None => Err(malformed(at, "invalid \\u escape: four hex digits must follow")),
            },
            Some(_) => Err(malformed(at + 1, "invalid escape in a string")),
            None => Err(malformed(self.bytes.len(), "EOF while parsing a string")),
        }
    }
}

/// The four hex digits at `at` as a number.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits.iter().try_fold(0u32, |n, &d| Some(n << 4 | (d as char).to_digit(16)?))
}

// ---------------------------------------------------------------------------------------------
// Stage 2: the grammar.

/// Which containers are open: bit `d` of `arrays` is set when level `d + 1` is an array.
struct Nesting {
    arrays: [u64; 4],
    depth: usize,
}

/// The most levels [`Nesting`] holds; a deeper line has more than [`FAST_SKIP_MAX_OPENINGS`]
/// brackets, so it falls under the [`MAX_DEPTH`] limit anyway.
const NESTING_MAX: usize = 256;
const _: () = assert!(NESTING_MAX >= FAST_SKIP_MAX_OPENINGS && NESTING_MAX >= MAX_DEPTH);

impl Nesting {
    /// Opens a level (`array` or object).
    #[inline(always)]
    fn push(&mut self, array: bool) {
        let d = self.depth;
        let word = &mut self.arrays[(d / 64) % 4];
        let bit = 1u64 << (d % 64);
        *word = if array { *word | bit } else { *word & !bit };
        self.depth += 1;
    }

    /// Closes a level; whether the one it returns to is an array.
    #[inline(always)]
    fn pop(&mut self) -> bool {
        self.depth -= 1;
        let d = self.depth.wrapping_sub(1);
        self.depth > 0 && self.arrays[(d / 64) % 4] & (1 << (d % 64)) != 0
    }
}

fn too_deep(at: usize) -> RecordError {
    malformed(at, &format!("arrays and objects nest deeper than {MAX_DEPTH} levels"))
}

/// Checks that the token at `at` is `literal`, followed by whitespace, `,`, `]`, `}` or the end
/// of the line.
#[inline(always)]
fn check_literal(bytes: &[u8], at: usize, literal: &[u8]) -> Result<(), RecordError> {
    let end = at + literal.len();
    if bytes.get(at..end) != Some(literal) {
        return Err(malformed(at, "invalid literal (expected true, false or null)"));
    }
    check_token_end(bytes, end)
}

#[inline(always)]
fn check_token_end(bytes: &[u8], end: usize) -> Result<(), RecordError> {
    match bytes.get(end) {
        None | Some(b' ' | b'\t' | b'\n' | b'\r' | b',' | b']' | b'}') => Ok(()),
        Some(_) => Err(malformed(end, "unexpected character after a value")),
    }
}

/// Past the digits of `bytes` from `i`: eight bytes at a time while eight are left.
#[inline(always)]
fn past_digits(bytes: &[u8], mut i: usize) -> usize {
    while let Some(eight) = bytes.get(i..).and_then(|rest| rest.first_chunk::<8>()) {
        let offsets = u64::from_le_bytes(*eight) ^ 0x3030_3030_3030_3030;
        // a byte's top bit is set where its offset from '0' is not 0..=9
        let non_digits =
            (offsets.wrapping_add(0x7676_7676_7676_7676) | offsets) & 0x8080_8080_8080_8080;
        if non_digits != 0 {
            return i + (non_digits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(b'0'..=b'9') = bytes.get(i) {
        i += 1;
    }
    i
}

/// Checks the number at `at` (JSON's syntax; a number too large for a double is malformed);
/// where it ends.
#[inline(always)]
fn check_number(bytes: &[u8], at: usize) -> Result<usize, RecordError> {
    let digits = |i: usize| past_digits(bytes, i);
    let mut i = at;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    let integer = i;
    match bytes.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i + 1),
        _ => return Err(malformed(i, "invalid number")),
    }
    let integer_digits = i - integer;
    if bytes.get(i) == Some(&b'.') {
        let fraction = i + 1;
        i = digits(fraction);
        if i == fraction {
            return Err(malformed(i, "invalid number: a digit must follow the '.'"));
        }
    }
    let mut exponent = 0i64;
    if let Some(b'e' | b'E') = bytes.get(i) {
        i += 1;
        let negative = match bytes.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let first = i;
        while let Some(&d) = bytes.get(i).filter(|d| d.is_ascii_digit()) {
            exponent = exponent.saturating_mul(10).saturating_add(i64::from(d - b'0'));
            i += 1;
        }
        if i == first {
            return Err(malformed(i, "invalid number: the exponent has no digits"));
        }
        if negative {
            exponent = -exponent;
        }
    }
    // the value is below 10^(integer digits + exponent): only a number that may reach past
    // f64::MAX (~1.8e308) is parsed to see whether it does
    if (integer_digits as i64).saturating_add(exponent) > 308 {
        let text = std::str::from_utf8(&bytes[at..i]).unwrap_or("inf");
        if !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(malformed(at, "number out of range (too large for a double)"));
        }
    }
    check_token_end(bytes, i).map(|()| i)
}

/// The text of the key whose opening quote is at `open` and whose colon is at `colon`: borrowed
/// from the line, or decoded into `scratch` when it has escapes (`escapes`: the line may have
/// some before the colon).
#[inline(always)]
fn key_text<'b>(
    bytes: &'b [u8],
    open: usize,
    colon: usize,
    escapes: bool,
    scratch: &'b mut String,
) -> Result<&'b [u8], RecordError> {
    let mut close = colon;
    while close > open + 1 && matches!(bytes[close - 1], b' ' | b'\t' | b'\n' | b'\r') {
        close -= 1;
    }
    // stage 1 put the colon outside the string, so a quote closes the key before it
    let raw = match bytes.get(open + 1..close.saturating_sub(1)) {
        Some(raw) if close > open + 1 && bytes[close - 1] == b'"' => raw,
        _ => return Err(malformed(open, "unterminated key")),
    };
    if !escapes || memchr::memchr(b'\\', raw).is_none() {
        return Ok(raw);
    }
    *scratch = sonic_rs::from_slice::<String>(&bytes[open..close])
        .map_err(|_| malformed(open, "invalid escape in a key"))?;
    Ok(scratch.as_bytes())
}

/// The fast path ([`masks`]) first; the precise walk when it cannot say that the line is valid.
#[inline(always)]
fn walk_generic<K: Classify, W: FnMut(&[u8]) -> Option<usize>>(
    bytes: &[u8],
    depth_rule: DepthRule,
    lengths: KeyLengths,
    mut want: W,
    found: &mut Found,
) -> Result<TopLevel, RecordError> {
    if let Some(top) = masks::walk_masks::<K, W>(bytes, lengths, &mut want, found) {
        return Ok(top);
    }
    found.clear();
    walk_precise::<K, W>(bytes, depth_rule, lengths, want, found)
}

/// Stage 2 over the structural starts stage 1 gives block by block (see the module doc). Past
/// the last one, `next!()` gives the line's length, whose byte reads as 0: no token.
#[inline(never)]
#[allow(unused_assignments)] // the last `next!()` leaves its block's starts unread
fn walk_precise<K: Classify, W: FnMut(&[u8]) -> Option<usize>>(
    bytes: &[u8],
    depth_rule: DepthRule,
    lengths: KeyLengths,
    mut want: W,
    found: &mut Found,
) -> Result<TopLevel, RecordError> {
    let byte = |at: usize| bytes.get(at).copied().unwrap_or(0);
    let mut scan = Scanner::<K>::new(bytes);
    // the structural starts of the current block not read yet, and the block's offset
    let (mut starts, mut block) = (0u64, 0usize);
    // The offset of the next structural start; the line's length past the last one.
    macro_rules! next {
        () => {{
            loop {
                if starts != 0 {
                    let at = block + starts.trailing_zeros() as usize;
                    starts &= starts - 1;
                    break at;
                }
                match scan.refill() {
                    Some((more, offset)) => (starts, block) = (more, offset),
                    None => break bytes.len(),
                }
            }
        }};
    }
    let mut nesting = Nesting { arrays: [0; 4], depth: 0 };
    // whether the innermost open container is an array
    let mut in_array = false;
    let limit = match depth_rule {
        DepthRule::LineMode if bytes.len() > STREAM_MAX_BYTES => NESTING_MAX,
        _ => MAX_DEPTH,
    };
    // the first container past MAX_DEPTH, when `limit` lets it pass (decided at the end)
    let mut deep_at = None;
    let mut scratch = String::new();
    // a wanted top-level value begun: (name, start)
    let mut pending: Option<(usize, usize)> = None;

    let mut at = next!();
    let top = match byte(at) {
        0 => return Err(scan.failure("EOF while parsing a value")),
        b'{' => TopLevel::Object,
        b'[' => TopLevel::Other("an array"),
        b'"' => TopLevel::Other("a string"),
        b't' | b'f' => TopLevel::Other("a boolean"),
        b'n' => TopLevel::Other("null"),
        _ => TopLevel::Other("a number"),
    };

    // An object's key at `$key`: checks it and its colon, records the value's start when the
    // key is a wanted one of the top-level object, and gives the value's first byte.
    macro_rules! key {
        ($key:expr) => {{
            let key = $key;
            if byte(key) != b'"' {
                return Err(match byte(key) {
                    0 => scan.failure("EOF while parsing an object"),
                    _ => malformed(key, "expected a string key"),
                });
            }
            let colon = next!();
            if byte(colon) != b':' {
                return Err(match byte(colon) {
                    0 => scan.failure("EOF while parsing an object"),
                    _ => malformed(colon, "expected ':' after an object key"),
                });
            }
            let value = next!();
            if nesting.depth == 1 {
                let text = key_text(bytes, key, colon, scan.backslashes, &mut scratch)?;
                if lengths.may_hold(text.len()) {
                    if let Some(name) = want(text) {
                        pending = Some((name, value));
                    }
                }
            }
            value
        }};
    }

    'value: loop {
        // a value starts at `at`
        let c = byte(at);
        if c == b'"' {
            // a string: stage 1 checked its contents
        } else if c.is_ascii_digit() || c == b'-' {
            check_number(bytes, at)?;
        } else if c == b'{' || c == b'[' {
            if nesting.depth >= limit {
                return Err(too_deep(at));
            }
            if nesting.depth >= MAX_DEPTH && deep_at.is_none() {
                deep_at = Some(at);
            }
            in_array = c == b'[';
            nesting.push(in_array);
            let first = next!();
            match byte(first) {
                b'}' if !in_array => in_array = nesting.pop(),
                b']' if in_array => in_array = nesting.pop(),
                _ if in_array => {
                    at = first;
                    continue 'value;
                }
                _ => {
                    at = key!(first);
                    continue 'value;
                }
            }
        } else if c == b't' {
            check_literal(bytes, at, b"true")?;
        } else if c == b'f' {
            check_literal(bytes, at, b"false")?;
        } else if c == b'n' {
            check_literal(bytes, at, b"null")?;
        } else if c == 0 {
            return Err(scan.failure("EOF while parsing a value"));
        } else {
            return Err(malformed(at, "expected a value"));
        }
        // after a value: close containers until one goes on
        loop {
            if nesting.depth == 0 {
                let extra = next!();
                if extra < bytes.len() {
                    return Err(malformed(extra, "trailing characters after the value"));
                }
                if let Some(e) = scan.error.take() {
                    return Err(e);
                }
                if let Some(deep) = deep_at {
                    if depth_rule == DepthRule::Everywhere
                        || bytes.len() <= STREAM_MAX_BYTES
                        || scan.openings > FAST_SKIP_MAX_OPENINGS
                    {
                        return Err(too_deep(deep));
                    }
                }
                return Ok(top);
            }
            let separator = next!();
            if nesting.depth == 1 {
                if let Some((name, start)) = pending.take() {
                    found.push(WantedValue { name, start, end: separator });
                }
            }
            match byte(separator) {
                b',' => {
                    let next = next!();
                    at = if in_array { next } else { key!(next) };
                    continue 'value;
                }
                b']' if in_array => in_array = nesting.pop(),
                b'}' if !in_array => in_array = nesting.pop(),
                0 => return Err(scan.failure("EOF while parsing an array or object")),
                _ if in_array => {
                    return Err(malformed(separator, "expected ',' or ']' after an array element"))
                }
                _ => return Err(malformed(separator, "expected ',' or '}' after an object entry")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kernels() -> Vec<Kernel> {
        Kernel::available()
    }

    /// The checker's answer with every kernel: all the same, and any error offset in the line.
    fn checked(bytes: &[u8]) -> Result<(), RecordError> {
        let mut answers = kernels().into_iter().map(|k| (k, check_with(k, bytes)));
        let (_, first) = answers.next().expect("a kernel");
        for (kernel, answer) in answers {
            assert_eq!(answer, first, "{kernel:?} on {:?}", String::from_utf8_lossy(bytes));
        }
        if let Err(RecordError::Malformed { offset, .. }) = &first {
            let at = offset.expect("an offset");
            assert!(at <= bytes.len(), "offset {at} past the line ({})", bytes.len());
        }
        first
    }

    /// The checker accepts exactly what decode_value accepts; and what serde_json accepts,
    /// where the line cannot nest past MAX_DEPTH (serde_json's own limit is 128).
    fn agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
        let ours = checked(bytes);
        let sonic = crate::decode_value(bytes);
        prop_assert_eq!(
            ours.is_ok(),
            sonic.is_ok(),
            "checker {:?}, decode_value {:?}, on {:?}",
            ours,
            sonic,
            String::from_utf8_lossy(bytes)
        );
        if memchr::memchr2_iter(b'{', b'[', bytes).count() <= MAX_DEPTH {
            let serde = serde_json::from_slice::<serde_json::Value>(bytes);
            prop_assert_eq!(
                ours.is_ok(),
                serde.is_ok(),
                "checker {:?}, serde_json {:?}, on {:?}",
                ours,
                serde,
                String::from_utf8_lossy(bytes)
            );
        }
        Ok(())
    }

    #[test]
    fn kernels_classify_alike() {
        let mut block = [0u8; 64];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000 {
            for b in block.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = if round % 2 == 0 {
                    state as u8
                } else {
                    b" \t\n\r{}[]:,\"\\a0\x01\x80"[(state % 16) as usize]
                };
            }
            let portable = Portable::classify(&block);
            #[cfg(target_arch = "x86_64")]
            {
                assert_eq!(Sse2::classify(&block), portable);
                if std::arch::is_x86_feature_detected!("avx2") {
                    assert_eq!(Avx2::classify(&block), portable);
                }
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    assert_eq!(Avx512::classify(&block), portable);
                }
            }
            // a line's last, partial block: as if padded with spaces, in a line of one block
            // (a padded copy) and in a longer one (its last 64 bytes, shifted down)
            let length = 1 + round % 63;
            let mut padded = [b' '; 64];
            padded[..length].copy_from_slice(&block[..length]);
            let tail = Portable::classify(&padded);
            let mut long_line = block.to_vec();
            long_line.extend_from_slice(&block[..length]);
            for (line, start) in [(&block[..length], 0), (&long_line[..], 64)] {
                assert_eq!(
                    Portable::classify_tail(line, start),
                    tail,
                    "{length} of {}",
                    line.len()
                );
                #[cfg(target_arch = "x86_64")]
                {
                    assert_eq!(Sse2::classify_tail(line, start), tail);
                    if std::arch::is_x86_feature_detected!("avx2") {
                        assert_eq!(Avx2::classify_tail(line, start), tail);
                    }
                    if std::arch::is_x86_feature_detected!("avx512bw") {
                        assert_eq!(Avx512::classify_tail(line, start), tail, "{length} bytes");
                    }
                }
            }
        }
    }

    #[test]
    fn accepts_and_rejects_as_the_json_readers_do() {
        let valid: &[&[u8]] = &[
            br#"{}"#,
            br#" { "a" : [ 1 , -2.5e-3 , true , false , null , "x" ] , "b" : { } } "#,
            br#"{"a":"\ud83d\ude00\u00e9\"\\\/\b\f\n\r\t"}"#,
            br#"{"a":1.7976931348623157e308,"b":1e-400,"c":0e99999999999,"d":-0}"#,
            b"{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"}",
            br#"[1,[2,[3]]]"#,
            br#""s""#,
            b"0",
            b"{}\r\n",
        ];
        let invalid: &[&[u8]] = &[
            b"",
            b"  ",
            br#"{"a":1,}"#,
            br#"{"a":[1,2,]}"#,
            br#"{"a" 1}"#,
            br#"{"a":1 "b":2}"#,
            br#"{1:2}"#,
            br#"{"a":01}"#,
            br#"{"a":1.}"#,
            br#"{"a":.5}"#,
            br#"{"a":1e}"#,
            br#"{"a":+1}"#,
            br#"{"a":-}"#,
            br#"{"a":1.8e308}"#,
            br#"{"a":1e400}"#,
            br#"{"a":tru}"#,
            br#"{"a":truex}"#,
            br#"{"a":nul}"#,
            br#"{"a":1"b"}"#,
            br#"{"a":"\x"}"#,
            br#"{"a":"\u12"}"#,
            br#"{"a":"\ud800"}"#,
            br#"{"a":"\udc00"}"#,
            br#"{"a":"\ud800\u0041"}"#,
            br#"{"a":"\ud800\\"}"#,
            br#"{"\ud800":1}"#,
            b"{\"a\":\"\x01\"}",
            b"{\"a\":\"\t\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":\"\xed\xa0\x80\"}",
            b"\xef\xbb\xbf{}",
            b"{}\x00",
            br#"{"a":1}}"#,
            br#"{"a":1} {"#,
            br#"{"a":1"#,
            br#"{"a":"#,
            br#"{"a""#,
            br#"{"a"#,
            br#"{"a":"b"#,
            br#"{"a":"b\"#,
            br#"["a\"]"#,
            br#"[1,]"#,
            br#"[,1]"#,
            br#"{,}"#,
            br#"{"a":1:2}"#,
            br#"[1:2]"#,
            br#"["a":1]"#,
            br#"{"a":[}"#,
            br#"{"a":{]}"#,
            br#"\"a\""#,
            br#"{"a":\"b"}"#,
        ];
        for json in valid {
            assert_eq!(checked(json), Ok(()), "{}", String::from_utf8_lossy(json));
            agrees(json).unwrap();
        }
        for json in invalid {
            assert!(checked(json).is_err(), "{}", String::from_utf8_lossy(json));
            agrees(json).unwrap();
        }
    }

    #[test]
    fn nesting_is_limited_without_recursion() {
        for depth in [MAX_DEPTH, MAX_DEPTH + 1, 256, 257, 100_000] {
            let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert_eq!(checked(deep.as_bytes()).is_ok(), depth <= MAX_DEPTH, "{depth}");
            let open = "{\"a\":".repeat(depth);
            assert!(checked(open.as_bytes()).is_err());
        }
    }

    #[test]
    fn finds_the_wanted_values_of_the_top_level_object_only() {
        let line = br#" {"a":1, "b" : [1,{"a":2}] ,"c":{"a":3},"a\u0062":"x","a":"y" } "#;
        let want = |key: &[u8]| match key {
            b"a" => Some(0),
            b"ab" => Some(1),
            _ => None,
        };
        let mut found = Found::new();
        for kernel in kernels() {
            let lengths = KeyLengths::of([&b"a"[..], b"ab"]);
            let top = walk(kernel, line, DepthRule::Everywhere, lengths, want, &mut found).unwrap();
            assert_eq!(top, TopLevel::Object);
            let texts: Vec<(usize, &str)> = found
                .iter()
                .map(|w| (w.name, std::str::from_utf8(&line[w.start..w.end]).unwrap()))
                .collect();
            assert_eq!(texts, [(0, "1"), (1, "\"x\""), (0, "\"y\" ")]);
        }
        let all = KeyLengths(u64::MAX);
        let top = walk(Kernel::detect(), b"[1]", DepthRule::Everywhere, all, want, &mut found);
        assert_eq!(top, Ok(TopLevel::Other("an array")));
    }

    /// JSON text with what a generator of values would not write: escapes of every kind
    /// (surrogate pairs, lone halves), numbers of every shape and size, whitespace anywhere.
    fn json_text() -> impl Strategy<Value = String> {
        let string = prop::collection::vec(
            prop_oneof![
                "[a-z0-9 é€😀]{0,3}",
                Just("\\\"".to_owned()),
                Just("\\\\".to_owned()),
                Just("\\/\\b\\f\\n\\r\\t".to_owned()),
                Just("\\u00e9".to_owned()),
                Just("\\uD83D\\uDE00".to_owned()),
                Just("\\ud800".to_owned()),
                Just("\\udc00".to_owned()),
                Just("\\u12G4".to_owned()),
            ],
            0..4,
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat()));
        let number = prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
            "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,5})?([eE][-+]?[0-9]{1,4})?",
            Just("1e400".to_owned()),
            Just("1.7976931348623157e308".to_owned()),
            Just("-0".to_owned()),
        ];
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            number,
            string.clone(),
        ];
        let ws = prop_oneof![Just(""), Just(" "), Just("\n\t"), Just("\r\n ")];
        leaf.prop_recursive(6, 48, 5, move |inner| {
            let entry = (string.clone(), ws.clone(), inner.clone())
                .prop_map(|(k, w, v)| format!("{w}{k}{w}:{w}{v}{w}"));
            prop_oneof![
                prop::collection::vec(inner, 0..5)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec(entry, 0..5).prop_map(|e| format!("{{{}}}", e.join(","))),
            ]
        })
    }

    /// Edits of a line: a byte replaced, removed, or inserted from bytes that matter to JSON.
    pub(super) fn damaged(bytes: &[u8], edits: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
        const TELLING: &[u8] = b"{}[]\",:\\0123456789e-.+ntfu \t\n\xff\xc3\x80\xed\x01";
        let mut bytes = bytes.to_vec();
        for (at, byte, op) in edits {
            let i = at.index(bytes.len() + 1);
            match op % 4 {
                0 if i < bytes.len() => bytes[i] = *byte,
                1 if i < bytes.len() => {
                    bytes.remove(i);
                }
                2 => bytes.truncate(i),
                _ => bytes.insert(i, TELLING[*byte as usize % TELLING.len()]),
            }
        }
        bytes
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn valid_json_is_accepted_as_serde_json_and_sonic_rs_accept_it(text in json_text()) {
            agrees(text.as_bytes())?;
        }

        #[test]
        fn damaged_json_is_judged_as_serde_json_and_sonic_rs_judge_it(
            text in json_text(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<u8>()), 1..4),
        ) {
            agrees(&damaged(text.as_bytes(), &edits))?;
        }

        #[test]
        fn any_bytes_are_judged_without_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            agrees(&bytes)?;
        }

        #[test]
        fn deep_values_are_judged_as_sonic_rs_judges_them(
            text in json_text(),
            depth in 28usize..40,
            at in any::<prop::sample::Index>(),
            arrays in any::<bool>(),
        ) {
            // a nest of `depth` levels put in place of a value of the text
            let (open, close) = if arrays { ("[", "]") } else { ("{\"k\":", "}") };
            let nest = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            let places: Vec<usize> = text.match_indices(['[', ':', ',']).map(|(i, _)| i + 1).collect();
            let line = if places.is_empty() {
                nest
            } else {
                let i = places[at.index(places.len())];
                format!("{}{nest},{}", &text[..i], &text[i..])
            };
            agrees(line.as_bytes())?;
        }
    }
}
