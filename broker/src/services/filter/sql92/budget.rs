//! The budget a selector must fit. Selectors arrive from clients (heartbeats, pulls,
//! CHECK_CLIENT_CONFIG), and everything that walks a compiled tree — evaluation, `Clone`,
//! `Drop`, `PartialEq` — recurses once per level, so the tree's depth is bounded before
//! it is built, not after. 4.9's JavaCC parser has no such bound: a deep selector throws
//! `StackOverflowError` there and fails only that request; here it would take the whole
//! process, so the parser refuses it with the limit's name instead.

/// The three limits, from `filterSqlMaxLength`, `filterSqlMaxDepth` and
/// `filterSqlMaxNodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sql92Limits {
    /// Bytes of selector text, checked before the lexer runs.
    pub max_length: usize,
    /// Levels of the compiled tree and of the parser's own recursion (parentheses and
    /// prefix operators), whichever is deeper.
    pub max_depth: u32,
    /// Nodes of the compiled tree, each `IN` item counted as one.
    pub max_nodes: u32,
}

impl Sql92Limits {
    /// Depth a caller may configure at most. The parser spends up to nine stack frames
    /// on one level of parentheses; at this ceiling an optimised build uses an eighth of
    /// a tokio worker's 2 MiB stack (`docs/benchmarks.md` has the measurement), and the
    /// default depth fits half of it even unoptimised.
    pub const DEPTH_CEILING: u32 = 64;

    /// The configured limits, the depth capped at [`Self::DEPTH_CEILING`].
    pub fn new(max_length: usize, max_depth: u32, max_nodes: u32) -> Self {
        Self {
            max_length,
            max_depth: max_depth.min(Self::DEPTH_CEILING),
            max_nodes,
        }
    }
}

impl Default for Sql92Limits {
    /// Generous for hand-written selectors (a few levels, tens of nodes), small enough
    /// that one evaluation per message stays cheap.
    fn default() -> Self {
        Self {
            max_length: 16 * 1024,
            max_depth: 32,
            max_nodes: 4096,
        }
    }
}

/// Which limit a refused selector exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    Length,
    Depth,
    Nodes,
}

impl Budget {
    /// The broker.conf key that sets this limit.
    pub fn key(self) -> &'static str {
        match self {
            Self::Length => "filterSqlMaxLength",
            Self::Depth => "filterSqlMaxDepth",
            Self::Nodes => "filterSqlMaxNodes",
        }
    }
}
