//! One message's values of the properties a selector names, decoded once per message and
//! indexed by the slots compilation assigned (see `ast::Slot`). The pull path fills them
//! straight from the stored bytes: one SIMD scan for the separators, a name comparison
//! only against the selector's few names, and UTF-8 validation only of the kept values.

use protocol::message::properties::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};

use memchr::memmem::Finder;

use super::PropertySource;

/// Most selectors name a handful of properties; their slots then live on the stack.
const INLINE: usize = 8;

const NAME_END: u8 = NAME_VALUE_SEPARATOR as u8;
const VALUE_END: u8 = PROPERTY_SEPARATOR as u8;

/// A property name a selector reads, with its segment pattern compiled once.
#[derive(Debug, Clone)]
pub struct Name {
    text: Box<str>,
    /// `U+0002 name U+0001`.
    segment: Finder<'static>,
}

impl Name {
    pub fn new(text: Box<str>) -> Self {
        let mut pattern = Vec::with_capacity(text.len() + 2);
        pattern.push(VALUE_END);
        pattern.extend_from_slice(text.as_bytes());
        pattern.push(NAME_END);
        Self {
            segment: Finder::new(&pattern).into_owned(),
            text,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// The value of the last non-empty `name` pair in `raw`, as `properties::iter` with
    /// last-wins would find it.
    fn last_value_in<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        let value_at = |start: usize| {
            let end = memchr::memchr(VALUE_END, &raw[start..]).map_or(raw.len(), |e| start + e);
            (end > start).then(|| &raw[start..end])
        };
        let mut last = None;
        for at in self.segment.find_iter(raw) {
            if let Some(v) = value_at(at + self.segment.needle().len()) {
                last = Some(v);
            }
        }
        let first_segment = || {
            let n = self.as_bytes();
            (!n.is_empty() && raw.starts_with(n) && raw.get(n.len()) == Some(&NAME_END))
                .then(|| value_at(n.len() + 1))
                .flatten()
        };
        last.or_else(first_segment)
    }
}

/// Values by slot; `None` is NULL (the message lacks the property).
#[derive(Debug, Clone)]
pub struct Slots<'a> {
    inline: [Option<&'a str>; INLINE],
    /// Used instead of `inline` by selectors naming more than [`INLINE`] properties.
    spilled: Vec<Option<&'a str>>,
    len: usize,
}

impl<'a> Slots<'a> {
    fn new(len: usize) -> Self {
        Self {
            inline: [None; INLINE],
            spilled: if len > INLINE {
                vec![None; len]
            } else {
                Vec::new()
            },
            len,
        }
    }

    pub(super) fn values(&self) -> &[Option<&'a str>] {
        if self.len > INLINE {
            &self.spilled
        } else {
            &self.inline[..self.len]
        }
    }

    fn values_mut(&mut self) -> &mut [Option<&'a str>] {
        if self.len > INLINE {
            &mut self.spilled
        } else {
            &mut self.inline[..self.len]
        }
    }

    /// Keeps `value` when `name` is one of `names`; a later duplicate overwrites, as
    /// Java's `HashMap`-based `decodeProperties` does.
    fn offer(&mut self, names: &[Name], name: &[u8], value: &'a str) {
        if let Some(i) = names.iter().position(|n| n.as_bytes() == name) {
            self.values_mut()[i] = Some(value);
        }
    }

    pub(super) fn from_text(names: &[Name], text: &'a str) -> Self {
        let mut slots = Self::new(names.len());
        for (name, value) in protocol::message::properties::iter(text) {
            slots.offer(names, name.as_bytes(), value);
        }
        slots
    }

    /// Same values as [`Self::from_text`]. Each name is searched for as a whole segment
    /// start, `U+0002 name U+0001` (a value cannot hold U+0002, so a match is always a
    /// real segment), or as the first segment; its value runs to the next U+0002. Only
    /// the selector's few names are searched, so the rest of the text is skipped by the
    /// substring search instead of being split pair by pair.
    pub(super) fn from_raw(names: &[Name], raw: &'a [u8]) -> Option<Self> {
        let mut slots = Self::new(names.len());
        for (slot, name) in slots.values_mut().iter_mut().zip(names) {
            *slot = name
                .last_value_in(raw)
                .map(std::str::from_utf8)
                .transpose()
                .ok()?;
        }
        Some(slots)
    }

    pub(super) fn from_source<P: PropertySource + ?Sized>(names: &[Name], props: &'a P) -> Self {
        let mut slots = Self::new(names.len());
        for (value, name) in slots.values_mut().iter_mut().zip(names) {
            *value = props.get(name.as_str());
        }
        slots
    }
}
