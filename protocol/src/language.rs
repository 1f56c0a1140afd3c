//! `LanguageCode` (`remoting/.../protocol/LanguageCode.java`): a u8 in the binary header,
//! the enum *name* in JSON headers.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LanguageCode {
    #[default]
    Java,
    Cpp,
    Dotnet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    /// Added in 4.9.4. Pre-4.9.4 Java peers do not know it, which is why this server
    /// always answers as `JAVA`, like the Java broker.
    Rust,
}

const ALL: [LanguageCode; 13] = [
    LanguageCode::Java,
    LanguageCode::Cpp,
    LanguageCode::Dotnet,
    LanguageCode::Python,
    LanguageCode::Delphi,
    LanguageCode::Erlang,
    LanguageCode::Ruby,
    LanguageCode::Other,
    LanguageCode::Http,
    LanguageCode::Go,
    LanguageCode::Php,
    LanguageCode::Oms,
    LanguageCode::Rust,
];

impl LanguageCode {
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Java maps unknown codes to `null`; we map them to `OTHER` so a client from the
    /// future is still served.
    pub fn from_code(code: u8) -> Self {
        ALL.get(code as usize)
            .copied()
            .unwrap_or(LanguageCode::Other)
    }

    pub fn name(self) -> &'static str {
        match self {
            LanguageCode::Java => "JAVA",
            LanguageCode::Cpp => "CPP",
            LanguageCode::Dotnet => "DOTNET",
            LanguageCode::Python => "PYTHON",
            LanguageCode::Delphi => "DELPHI",
            LanguageCode::Erlang => "ERLANG",
            LanguageCode::Ruby => "RUBY",
            LanguageCode::Other => "OTHER",
            LanguageCode::Http => "HTTP",
            LanguageCode::Go => "GO",
            LanguageCode::Php => "PHP",
            LanguageCode::Oms => "OMS",
            LanguageCode::Rust => "RUST",
        }
    }

    pub fn from_name(name: &str) -> Self {
        ALL.iter()
            .copied()
            .find(|l| l.name().eq_ignore_ascii_case(name))
            .unwrap_or(LanguageCode::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for (i, l) in ALL.iter().enumerate() {
            assert_eq!(l.code() as usize, i);
            assert_eq!(LanguageCode::from_code(i as u8), *l);
            assert_eq!(LanguageCode::from_name(l.name()), *l);
        }
        assert_eq!(LanguageCode::Rust.code(), 12);
        assert_eq!(LanguageCode::from_code(200), LanguageCode::Other);
        assert_eq!(LanguageCode::from_name("cpp"), LanguageCode::Cpp);
    }
}
