//! Event types the emulator declares itself, beside the catalogue's: MMIO
//! accesses by device, TLB fills, exceptions with their cause, a guest's
//! system calls. Declared once at item level, in any crate (a library
//! declares its own), fired like the catalogue's types:
//!
//! ```
//! styx_probe::event_enum! {
//!     /// The emulated devices.
//!     pub enum Device: u8 { Uart = 0, Timer = 1 }
//! }
//! styx_probe::event! {
//!     /// A store to a device register.
//!     pub mmio_write(pc: u32, device: Device, addr: styx_probe::Addr<u32>, val: u32);
//! }
//! # let (pc, addr, val) = (0x600u32, 0x10u32, 7u32);
//! styx_probe::fire!(mmio_write, || (pc, Device::Uart, styx_probe::Addr(addr), val));
//! ```
//!
//! Why a type and `fire!`, not a macro per event: a type is named,
//! imported and made `pub` as any Rust item is (a library's events are
//! its public types); a macro defined by a macro is not.
//!
//! What the declaration makes (`styx_common::schema` has the layout):
//! - the type's semaphore word, in `.probes` beside the catalogue's, and
//!   the one check `fire!` inlines where it is written (one load of the
//!   word, a test and a branch, as every probe: `__check!`);
//! - a note describing the type (`.note.styx`): its name, its fields'
//!   names, kinds and widths, the names of enum values — a loader learns
//!   them from the binary;
//! - one USDT site of the type, provider the declaring crate's name
//!   (`usdt:./emu:emu:mmio_write` in bpftrace: each crate its own
//!   namespace, no clash with `styx:` or another library's names), its
//!   fields in order as `u64` registers; and a batch-enable site
//!   `styx_batch:NAME`, as the catalogue's batched types have.
//!
//! While a batch tracer holds the type, the values are appended to the
//! thread's batch, each in its declared width, behind the type's tag: its
//! semaphore's distance from the flush site's, in words
//! (`styx_common::schema::declared_tag`).

#[cfg(not(feature = "disabled"))]
use crate::enabled::SemaphoreWord;
#[cfg(not(feature = "disabled"))]
use crate::enabled::PER_EVENT;
#[cfg(not(feature = "disabled"))]
use crate::fire::{call_site_function, thread_buffer, value_offsets, PackedSiteFn};
#[cfg(not(feature = "disabled"))]
use styx_common::item::TAG_BYTES;
use styx_common::schema::{EnumValue, FieldKind, MAX_FIELDS};
#[cfg(not(feature = "disabled"))]
use styx_common::EventKind;

/// A type a declared event's field may have: the unsigned and signed
/// integers, `bool`, [`Addr`], [`Reg`] and enums made by
/// [`event_enum!`](crate::event_enum!).
pub trait Field: Copy {
    /// How it reads.
    const KIND: FieldKind;
    /// Bytes it takes in a batch: 1, 2, 4 or 8.
    const BYTES: usize;
    /// An enum's name, else empty.
    const ENUM: &'static str = "";
    /// An enum's values and their names, else none.
    const VALUES: &'static [EnumValue] = &[];
    /// The value in a `u64` register: zero-extended, or sign-extended
    /// for a signed integer (a batch keeps its low [`Field::BYTES`]).
    fn bits(self) -> u64;
}

macro_rules! integer_fields {
    ($kind:ident: $($t:ty),*) => {$(
        impl Field for $t {
            const KIND: FieldKind = FieldKind::$kind;
            const BYTES: usize = core::mem::size_of::<$t>();
            #[inline(always)]
            fn bits(self) -> u64 {
                self as u64
            }
        }
    )*};
}
integer_fields!(Unsigned: u8, u16, u32, u64, usize);
integer_fields!(Signed: i8, i16, i32, i64, isize);

impl Field for bool {
    const KIND: FieldKind = FieldKind::Bool;
    const BYTES: usize = 1;
    #[inline(always)]
    fn bits(self) -> u64 {
        self as u64
    }
}

/// A field that is an address: shown in hex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addr<T>(pub T);

/// A field that is a register number: shown by its name where the guest
/// is described (`describe!`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg<T>(pub T);

macro_rules! wrapped_fields {
    ($($t:ty),*) => {$(
        impl Field for Addr<$t> {
            const KIND: FieldKind = FieldKind::Address;
            const BYTES: usize = core::mem::size_of::<$t>();
            #[inline(always)]
            fn bits(self) -> u64 {
                self.0 as u64
            }
        }
        impl Field for Reg<$t> {
            const KIND: FieldKind = FieldKind::Register;
            const BYTES: usize = core::mem::size_of::<$t>();
            #[inline(always)]
            fn bits(self) -> u64 {
                self.0 as u64
            }
        }
    )*};
}
wrapped_fields!(u8, u16, u32, u64, usize);

/// A declared event type (made by [`event!`](crate::event!)); what
/// [`fire!`](crate::fire!) calls.
pub trait Declared {
    /// The values, in the order of the fields.
    type Values: Fields;
    /// The type's semaphore word: zero while nothing is attached (one load).
    fn word() -> u32;
    /// Runs `fire` while the type's semaphore word is not zero: the call
    /// site's check, as the catalogue's probes make it (`__check!`).
    fn if_armed(fire: impl FnOnce());
    /// Hands the values to whoever holds `word` up, from the call site's
    /// cold block (see [`call_site`]).
    fn call_site(word: u32, values: Self::Values);
}

/// Declares event types: `NAME(FIELD: TYPE, …);` each, with doc comments
/// and a visibility, at most 8 fields of [`Field`] types. Each becomes a
/// unit struct `NAME`, fired with [`fire!`](crate::fire!).
///
/// ```
/// styx_probe::event! {
///     /// A TLB miss: the guest's virtual address and whether it was a store.
///     pub tlb_miss(pc: u64, va: styx_probe::Addr<u64>, store: bool);
///     /// The ALU's flags differed from a reference model's by `delta`.
///     flags_delta(pc: u16, delta: i8);
/// }
/// styx_probe::fire!(tlb_miss, || (0x8000_0000u64, styx_probe::Addr(0x1000u64), false));
/// styx_probe::fire!(flags_delta, || (0x600u16, -2i8));
/// ```
#[macro_export]
macro_rules! event {
    ($($(#[$meta:meta])* $vis:vis $name:ident($($field:ident: $ty:ty),* $(,)?);)+) => {$(
        $(#[$meta])*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug)]
        $vis struct $name;

        const _: () = {
            $crate::__declared_type!($name, [$($field: $ty),*]);
        };
    )+};
}

/// The items of a declared type (see [`event!`](crate::event!)).
#[doc(hidden)]
#[macro_export]
#[cfg(not(feature = "disabled"))]
macro_rules! __declared_type {
    ($name:ident, [$($field:ident: $ty:ty),*]) => {
        #[link_section = ".probes"]
        static SEMAPHORE: $crate::__SemaphoreWord = $crate::__SemaphoreWord::new();

        const FIELDS: &[$crate::__schema::FieldEntry] = &[$((
            stringify!($field),
            <$ty as $crate::Field>::KIND,
            <$ty as $crate::Field>::BYTES,
            <$ty as $crate::Field>::ENUM,
            <$ty as $crate::Field>::VALUES,
        )),*];
        const LEN: usize =
            $crate::__schema::note_len(env!("CARGO_CRATE_NAME"), stringify!($name), FIELDS);
        #[used]
        #[link_section = ".note.styx"]
        static NOTE: $crate::__guest::Note<LEN> = $crate::__guest::Note(
            $crate::__schema::note(env!("CARGO_CRATE_NAME"), stringify!($name), FIELDS),
        );

        /// The type's one per-event site (and its batch-enable site,
        /// jumped over): every field a `u64` register.
        #[inline(never)]
        #[cold]
        fn site(values: [u64; $crate::__schema::MAX_FIELDS]) {
            $crate::__declared_site!(SEMAPHORE, $name, values, [$($field)*]);
            $crate::__probe_site!(@skipped "styx_batch", stringify!($name), SEMAPHORE, 2);
        }

        /// What the append routine calls when it does not append itself:
        /// the values as they are.
        extern "C" fn unpacked(a: u64, b: u64, c: u64, d: u64, e: u64) {
            $crate::__declared::unpacked::<<$name as $crate::Declared>::Values>(
                $crate::__load_word!(SEMAPHORE),
                &SEMAPHORE,
                site,
                [a, b, c, d, e],
            )
        }

        /// The same for the packed append routine (more fields).
        extern "C" fn packed(a: u64, b: u64, c: u64, d: u64, e: u64) {
            $crate::__declared::packed::<<$name as $crate::Declared>::Values>(
                $crate::__load_word!(SEMAPHORE),
                site,
                [a, b, c, d, e],
            )
        }

        /// An item too wide for the append routine's registers.
        #[inline(never)]
        #[cold]
        fn wide(values: [u64; $crate::__schema::MAX_FIELDS]) {
            $crate::__declared::wide(
                $crate::__load_word!(SEMAPHORE),
                &SEMAPHORE,
                site,
                values,
                <<$name as $crate::Declared>::Values as $crate::__declared::Fields>::WIDTHS,
            )
        }

        impl $crate::Declared for $name {
            type Values = ($($ty,)*);

            #[inline(always)]
            fn word() -> u32 {
                $crate::__load_word!(SEMAPHORE)
            }

            #[inline(always)]
            fn if_armed(fire: impl FnOnce()) {
                $crate::__check!(SEMAPHORE, { fire() })
            }

            #[inline(always)]
            fn call_site(word: u32, values: Self::Values) {
                $crate::__declared::call_site(
                    word,
                    values,
                    &SEMAPHORE,
                    $crate::__declared::SiteFns { unpacked, packed, wide },
                )
            }
        }
    };
}

/// With probes compiled out: the type and its `Declared` impl, nothing else.
#[doc(hidden)]
#[macro_export]
#[cfg(feature = "disabled")]
macro_rules! __declared_type {
    ($name:ident, [$($field:ident: $ty:ty),*]) => {
        impl $crate::Declared for $name {
            type Values = ($($ty,)*);
            #[inline(always)]
            fn word() -> u32 {
                0
            }
            #[inline(always)]
            fn if_armed(_: impl FnOnce()) {}
            fn call_site(_: u32, _: Self::Values) {}
        }
    };
}

/// The per-event site of a declared type: its fields in the argument
/// registers, in order (`rdi`, `rsi`, `rdx`, `rcx`, `r8`, `r9`, `r10`, `r11`).
#[doc(hidden)]
#[macro_export]
macro_rules! __declared_site {
    ($sema:ident, $name:ident, $v:ident, []) => {
        $crate::__declared_site!(@ $sema, $name, "", [])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi", ["rdi" = $v[0]])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident $b:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi 8@%rsi", ["rdi" = $v[0], "rsi" = $v[1]])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident $b:ident $c:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi 8@%rsi 8@%rdx",
            ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2]])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident $b:ident $c:ident $d:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi 8@%rsi 8@%rdx 8@%rcx",
            ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2], "rcx" = $v[3]])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident $b:ident $c:ident $d:ident $e:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8",
            ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2], "rcx" = $v[3], "r8" = $v[4]])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident $b:ident $c:ident $d:ident $e:ident $f:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9",
            ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2], "rcx" = $v[3], "r8" = $v[4], "r9" = $v[5]])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident $b:ident $c:ident $d:ident $e:ident $f:ident $g:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%r10",
            ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2], "rcx" = $v[3], "r8" = $v[4], "r9" = $v[5],
             "r10" = $v[6]])
    };
    ($sema:ident, $name:ident, $v:ident, [$a:ident $b:ident $c:ident $d:ident $e:ident $f:ident $g:ident $h:ident]) => {
        $crate::__declared_site!(@ $sema, $name, "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%r10 8@%r11",
            ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2], "rcx" = $v[3], "r8" = $v[4], "r9" = $v[5],
             "r10" = $v[6], "r11" = $v[7]])
    };
    (@ $sema:ident, $name:ident, $spec:literal, [$($reg:tt = $val:expr),*]) => {
        $crate::__probe_site!(@str "", "", 0, env!("CARGO_CRATE_NAME"), stringify!($name), $sema, 0,
            $spec, [$($reg = $val),*], readonly)
    };
}

/// Fires a declared event type: `fire!(TYPE, || (values…))`, the values
/// of its fields in order, of their declared types, or an `Option` of them
/// (`None` fires nothing). The closure runs only
/// while a tracer is attached; detached, this is one load of the type's
/// semaphore word, a test and a branch.
#[macro_export]
macro_rules! fire {
    ($event:ty, $args:expr) => {{
        <$event as $crate::Declared>::if_armed(|| {
            // Off the straight line, as the catalogue's probes.
            ::core::hint::cold_path();
            // The word again, for whom the values go to: its low half,
            // per-event tracers. Zero if the tracer left since the check:
            // the item then goes to the thread's batch, as it may when the
            // tracer leaves between any check and the append.
            let word = <$event as $crate::Declared>::word();
            // The closure's values, or its `Option` of them.
            if let Some(values) = $crate::__declared::Event::values(($args)()) {
                <$event as $crate::Declared>::call_site(word, values);
            }
        })
    }};
}

/// Defines an enum whose values a declared event's field may take, and
/// whose names every output shows: `enum NAME: REPR { VARIANT = VALUE, … }`
/// (`REPR` an unsigned integer type).
///
/// ```
/// styx_probe::event_enum! {
///     pub enum Cause: u8 { Breakpoint = 3, PageFault = 14 }
/// }
/// assert_eq!(Cause::PageFault as u8, 14);
/// ```
#[macro_export]
macro_rules! event_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident: $repr:ty {
        $($(#[$vmeta:meta])* $variant:ident = $value:expr),* $(,)?
    }) => {
        $(#[$meta])*
        #[repr($repr)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant = $value),*
        }

        impl $crate::Field for $name {
            const KIND: $crate::__schema::FieldKind = $crate::__schema::FieldKind::Enum;
            const BYTES: usize = core::mem::size_of::<$repr>();
            const ENUM: &'static str = stringify!($name);
            const VALUES: &'static [$crate::__schema::EnumValue] =
                &[$(($value as u64, stringify!($variant))),*];
            #[inline(always)]
            fn bits(self) -> u64 {
                self as $repr as u64
            }
        }
    };
}

/// A declared type's values, a tuple of [`Field`]s: their widths, and
/// their bits in registers (the names of the fields are the
/// declaration's, which may be any names, so the tuple is taken apart
/// here).
#[doc(hidden)]
pub trait Fields {
    /// Bytes of each value in a batch.
    const WIDTHS: &'static [usize];
    /// Whether each value is signed.
    const SIGNED: &'static [bool];
    /// Bytes of the values in a batch.
    const VALUE_BYTES: usize;
    /// The values in registers, in order (the rest 0).
    fn bits(self) -> [u64; MAX_FIELDS];
}

/// What `fire!`'s closure may return: the values, or an `Option` of them
/// (`None`: no event), as for the catalogue's probes.
#[doc(hidden)]
pub trait Event<T> {
    fn values(self) -> Option<T>;
}

impl<T: Fields> Event<T> for T {
    #[inline(always)]
    fn values(self) -> Option<T> {
        Some(self)
    }
}

impl<T: Fields> Event<T> for Option<T> {
    #[inline(always)]
    fn values(self) -> Option<T> {
        self
    }
}

macro_rules! fields_of_tuples {
    ($(($($t:ident $v:ident),*))*) => {$(
        impl<$($t: Field),*> Fields for ($($t,)*) {
            const WIDTHS: &'static [usize] = &[$($t::BYTES),*];
            const SIGNED: &'static [bool] = &[$(matches!($t::KIND, FieldKind::Signed)),*];
            const VALUE_BYTES: usize = 0 $(+ $t::BYTES)*;
            #[inline(always)]
            #[allow(unused_mut, unused_variables, unused_assignments)]
            fn bits(self) -> [u64; MAX_FIELDS] {
                let ($($v,)*) = self;
                let mut bits = [0u64; MAX_FIELDS];
                let mut i = 0;
                $(
                    bits[i] = $v.bits();
                    i += 1;
                )*
                bits
            }
        }
    )*};
}
fields_of_tuples! {
    ()
    (A a)
    (A a, B b)
    (A a, B b, C c)
    (A a, B b, C c, D d)
    (A a, B b, C c, D d, E e)
    (A a, B b, C c, D d, E e, F f)
    (A a, B b, C c, D d, E e, F f, G g)
    (A a, B b, C c, D d, E e, F f, G g, H h)
}

/// Bytes of a declared type's item the packed append routine takes in
/// its registers: five words.
#[cfg(not(feature = "disabled"))]
const PACKED_BYTES: usize = 40;

/// A declared type's cold block: the values as they are, up to
/// [`UNPACKED_FIELDS`] of them, and the
/// item's head (its tag, the semaphore's distance from the flush site's,
/// and its length) in registers for the append routine
/// ([`declared_append`], as the catalogue's types'); more values
/// packed into registers ([`declared_packed_append`]); an item wider
/// than those goes to `wide`, in Rust.
#[doc(hidden)]
#[cfg(not(feature = "disabled"))]
#[inline(always)]
pub fn call_site<F: Fields>(
    word: u32,
    values: F,
    semaphore: &'static SemaphoreWord,
    sites: SiteFns,
) {
    let flush = &raw const crate::batch::FLUSH as u64;
    let tag = styx_common::schema::declared_tag(semaphore as *const _ as u64, flush);
    let head = tag as u64 | (F::VALUE_BYTES as u64) << (8 * TAG_BYTES);
    let bits = values.bits();
    if F::WIDTHS.len() <= UNPACKED_FIELDS {
        let values = [bits[0], bits[1], bits[2], bits[3], bits[4]];
        return call_declared::<F>(word, sites.unpacked, head as u32, values);
    }
    if TAG_BYTES + 1 + F::VALUE_BYTES > PACKED_BYTES {
        return (sites.wide)(bits);
    }
    let words = crate::fire::pack(head, TAG_BYTES + 1, &bits, F::WIDTHS);
    call_declared_packed::<F>(word, sites.packed, words);
}

/// A declared type's functions its append routines call when they do not
/// append themselves (a per-event tracer, no buffer yet, a time mark due):
/// with the values as they are (`unpacked`) or packed, and for an item
/// too wide for either routine (`wide`).
#[doc(hidden)]
#[cfg(not(feature = "disabled"))]
#[derive(Clone, Copy)]
pub struct SiteFns {
    pub unpacked: PackedSiteFn,
    pub packed: PackedSiteFn,
    pub wide: fn([u64; MAX_FIELDS]),
}

/// What the unpacked append routine hands on: the per-event site takes the
/// values, the thread's batch the item.
#[doc(hidden)]
#[cfg(not(feature = "disabled"))]
pub fn unpacked<F: Fields>(
    word: u32,
    semaphore: &'static SemaphoreWord,
    site: fn([u64; MAX_FIELDS]),
    values: [u64; 5],
) {
    let mut fields = [0u64; MAX_FIELDS];
    let n = F::WIDTHS.len();
    // As the fields' `bits()` gave them (signed ones sign-extended).
    fields[..n].copy_from_slice(&values[..n]);
    wide(word, semaphore, site, fields, F::WIDTHS);
}

/// What the packed append routine hands on (a per-event tracer, no buffer
/// yet, a time mark due): the per-event site takes the values unpacked,
/// the thread's batch the packed item.
#[doc(hidden)]
#[cfg(not(feature = "disabled"))]
pub fn packed<F: Fields>(word: u32, site: fn([u64; MAX_FIELDS]), words: [u64; 5]) {
    if word & PER_EVENT != 0 {
        let mut fields: [u64; MAX_FIELDS] = crate::fire::unpack(&words, TAG_BYTES + 1, F::WIDTHS);
        for ((field, &bytes), &signed) in fields.iter_mut().zip(F::WIDTHS).zip(F::SIGNED) {
            let unused = 64 - 8 * bytes as u32;
            if signed && unused > 0 {
                // As the field's `bits()` gave it: sign-extended.
                *field = ((*field << unused) as i64 >> unused) as u64;
            }
        }
        site(fields);
    }
    if word > PER_EVENT {
        let bytes = TAG_BYTES + 1 + F::VALUE_BYTES;
        crate::batch::push(EventKind::Usdt as u8, bytes as u32, words);
    }
}

/// An item wider than the append routine's registers, in Rust.
#[doc(hidden)]
#[cfg(not(feature = "disabled"))]
pub fn wide(
    word: u32,
    semaphore: &'static SemaphoreWord,
    site: fn([u64; MAX_FIELDS]),
    values: [u64; MAX_FIELDS],
    widths: &[usize],
) {
    let semaphore = semaphore as *const SemaphoreWord as u64;
    foreign(
        word,
        semaphore,
        || site(values),
        &values[..widths.len()],
        widths,
    );
}

/// Fires an event of a declared type whose semaphore word, at address
/// `semaphore`, and per-event site are not styx-probe's: a C emulator's,
/// written by styx-probe-c's generator. `site` runs the per-event site
/// while one tracer takes events one by one; while a batch tracer holds
/// the type the values are appended in their `widths` (each 1, 2, 4 or 8,
/// as many as `values`), behind the tag of a semaphore in this module
/// (the static library linked into the emulator).
#[doc(hidden)]
#[cfg(not(feature = "disabled"))]
pub fn foreign(word: u32, semaphore: u64, site: impl FnOnce(), values: &[u64], widths: &[usize]) {
    if word & PER_EVENT != 0 {
        site();
    }
    if word > PER_EVENT {
        let flush = &raw const crate::batch::FLUSH as u64;
        let tag = styx_common::schema::declared_tag(semaphore, flush);
        crate::batch::push_declared(tag, values, widths);
    }
}

/// The most fields a declared type's values may have to be passed to its
/// append routine as they are (`rdi`, `rsi`, `rdx`, `rcx`, `r8`), each
/// stored at its offset by the routine ([`declared_append`]); more go
/// packed ([`declared_packed_append`]).
#[cfg(not(feature = "disabled"))]
pub(crate) const UNPACKED_FIELDS: usize = 5;

/// Calls [`declared_append`] from a declared type's cold block with its
/// values as they are (the first `F::WIDTHS.len()` of them) and the
/// item's head (tag and length byte) in `r10d`: as [`call_append!`](crate::fire), the
/// semaphore word it read in `r11`, `r9` clobbered too.
#[cfg(not(feature = "disabled"))]
#[inline(always)]
pub(crate) fn call_declared<F: Fields>(word: u32, site: PackedSiteFn, head: u32, values: [u64; 5]) {
    match F::WIDTHS.len() {
        0 => declared_call!(F, word, site, head, [out("rdi") _, out("rsi") _, out("rdx") _,
            out("rcx") _, out("r8") _,]),
        1 => declared_call!(F, word, site, head, [inout("rdi") values[0] => _, out("rsi") _,
            out("rdx") _, out("rcx") _, out("r8") _,]),
        2 => declared_call!(F, word, site, head, [inout("rdi") values[0] => _,
            inout("rsi") values[1] => _, out("rdx") _, out("rcx") _, out("r8") _,]),
        3 => declared_call!(F, word, site, head, [inout("rdi") values[0] => _,
            inout("rsi") values[1] => _, inout("rdx") values[2] => _, out("rcx") _, out("r8") _,]),
        4 => declared_call!(F, word, site, head, [inout("rdi") values[0] => _,
            inout("rsi") values[1] => _, inout("rdx") values[2] => _,
            inout("rcx") values[3] => _, out("r8") _,]),
        _ => declared_call!(F, word, site, head, [inout("rdi") values[0] => _,
            inout("rsi") values[1] => _, inout("rdx") values[2] => _,
            inout("rcx") values[3] => _, inout("r8") values[4] => _,]),
    }
}

/// One arm of [`call_declared`]: the call with these value registers.
#[cfg(not(feature = "disabled"))]
macro_rules! declared_call {
    ($F:ident, $word:expr, $site:expr, $head:expr, [$($values:tt)*]) => {
        // SAFETY: `declared_append` returns with every register but these
        // and the flags as it found them, and the stack pointer restored.
        unsafe {
            core::arch::asm!(
                "call {append}",
                append = sym declared_append::<$F>,
                inout("rax") $site => _,
                inout("r11") $word => _,
                inout("r10") $head => _,
                $($values)*
                out("r9") _,
                out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            )
        }
    };
}
#[cfg(not(feature = "disabled"))]
use declared_call;

/// The append routine of a declared type whose values are `F`, at most
/// [`UNPACKED_FIELDS`] of them: as a catalogue type's (`fire::fast_append!`),
/// the semaphore word given (in `r11`: the call site read it, not zero,
/// and each type has its own), and the item's head (its tag, which is the
/// type's, and its length byte) in `r10d`, stored as 4 bytes, the first
/// value's store overwriting the last; each value whole at its offset, in
/// order; counted as other providers' probes' events (`EventKind::Usdt`).
#[cfg(not(feature = "disabled"))]
#[unsafe(naked)]
unsafe extern "C" fn declared_append<F: Fields>() {
    core::arch::naked_asm!(
        "test r11d, {per_event}",
        "jnz 2f",
        thread_buffer!(),
        "mov r9d, dword ptr [r11 + {len}]",
        "cmp r9d, dword ptr [r11 + {room}]",
        "jae 2f",
        "mov dword ptr [r11 + r9 + {item}], r10d",
        ".if {n} > 0",
        "mov qword ptr [r11 + r9 + {item} + {at0}], rdi",
        ".endif",
        ".if {n} > 1",
        "mov qword ptr [r11 + r9 + {item} + {at1}], rsi",
        ".endif",
        ".if {n} > 2",
        "mov qword ptr [r11 + r9 + {item} + {at2}], rdx",
        ".endif",
        ".if {n} > 3",
        "mov qword ptr [r11 + r9 + {item} + {at3}], rcx",
        ".endif",
        ".if {n} > 4",
        "mov qword ptr [r11 + r9 + {item} + {at4}], r8",
        ".endif",
        "inc dword ptr [r11 + {count}]",
        // The new length last (x86 stores are release stores): a thread
        // flushing at exit sees the item.
        "add dword ptr [r11 + {len}], {bytes}",
        "ret",
        "2:",
        call_site_function!(),
        per_event = const PER_EVENT,
        len = const crate::batch::fast::LEN,
        room = const crate::batch::fast::ROOM,
        item = const crate::batch::fast::ITEMS,
        n = const F::WIDTHS.len(),
        at0 = const value_offsets::<UNPACKED_FIELDS>(TAG_BYTES + 1, F::WIDTHS)[0],
        at1 = const value_offsets::<UNPACKED_FIELDS>(TAG_BYTES + 1, F::WIDTHS)[1],
        at2 = const value_offsets::<UNPACKED_FIELDS>(TAG_BYTES + 1, F::WIDTHS)[2],
        at3 = const value_offsets::<UNPACKED_FIELDS>(TAG_BYTES + 1, F::WIDTHS)[3],
        at4 = const value_offsets::<UNPACKED_FIELDS>(TAG_BYTES + 1, F::WIDTHS)[4],
        bytes = const TAG_BYTES + 1 + F::VALUE_BYTES,
        count = const crate::batch::fast::COUNTS + 4 * EventKind::Usdt as usize,
    );
}

/// Calls [`declared_packed_append`] from a declared type's cold block with
/// its packed item: as [`call_append!`](crate::fire), the semaphore word it read in
/// `r11`.
#[cfg(not(feature = "disabled"))]
#[inline(always)]
pub(crate) fn call_declared_packed<F: Fields>(word: u32, site: PackedSiteFn, words: [u64; 5]) {
    // SAFETY: `declared_packed_append` returns with every register but
    // these and the flags as it found them, and the stack pointer restored.
    unsafe {
        core::arch::asm!(
            "call {append}",
            append = sym declared_packed_append::<F>,
            inout("rax") site => _,
            inout("r11") word => _,
            inout("rdi") words[0] => _,
            inout("rsi") words[1] => _,
            inout("rdx") words[2] => _,
            inout("rcx") words[3] => _,
            inout("r8") words[4] => _,
            out("r10") _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
        );
    }
}

/// The append routine of a declared type with more than
/// [`UNPACKED_FIELDS`] values, packed by the call site into at most five
/// words: as [`declared_append`], the five words stored.
#[cfg(not(feature = "disabled"))]
#[unsafe(naked)]
unsafe extern "C" fn declared_packed_append<F: Fields>() {
    core::arch::naked_asm!(
        "test r11d, {per_event}",
        "jnz 2f",
        thread_buffer!(),
        "mov r10d, dword ptr [r11 + {len}]",
        "cmp r10d, dword ptr [r11 + {room}]",
        "jae 2f",
        "mov qword ptr [r11 + r10 + {item}], rdi",
        "mov qword ptr [r11 + r10 + {item} + 8], rsi",
        "mov qword ptr [r11 + r10 + {item} + 16], rdx",
        "mov qword ptr [r11 + r10 + {item} + 24], rcx",
        "mov qword ptr [r11 + r10 + {item} + 32], r8",
        "inc dword ptr [r11 + {count}]",
        // The new length last (x86 stores are release stores): a thread
        // flushing at exit sees the item.
        "add dword ptr [r11 + {len}], {bytes}",
        "ret",
        "2:",
        call_site_function!(),
        per_event = const PER_EVENT,
        len = const crate::batch::fast::LEN,
        room = const crate::batch::fast::ROOM,
        item = const crate::batch::fast::ITEMS,
        bytes = const TAG_BYTES + 1 + F::VALUE_BYTES,
        count = const crate::batch::fast::COUNTS + 4 * EventKind::Usdt as usize,
    );
}
