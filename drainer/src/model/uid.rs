//! A pod's uid as the drainer keeps it ([`Uid`]): 16 bytes for the UUIDs the API server makes.
//! Pure.

/// A pod's uid: 16 bytes when it is a UUID (as the API server makes them), else the text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Uid {
    Uuid([u8; 16]),
    Other(Box<str>),
}

impl Uid {
    pub fn parse(s: &str) -> Uid {
        let hex: Vec<u8> = s.bytes().filter(|b| *b != b'-').collect();
        let canonical = s.len() == 36 && [8, 13, 18, 23].iter().all(|&i| s.as_bytes()[i] == b'-');
        let mut out = [0u8; 16];
        if canonical && hex.len() == 32 {
            let ok = hex.chunks(2).zip(out.iter_mut()).all(|(pair, o)| {
                let digits = std::str::from_utf8(pair).ok();
                match digits.and_then(|d| u8::from_str_radix(d, 16).ok()) {
                    Some(v) if pair.iter().all(|c| !c.is_ascii_uppercase()) => {
                        *o = v;
                        true
                    }
                    _ => false,
                }
            });
            if ok {
                return Uid::Uuid(out);
            }
        }
        Uid::Other(s.into())
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uid::Other(s) => f.write_str(s),
            Uid::Uuid(b) => {
                for (i, byte) in b.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
        }
    }
}
