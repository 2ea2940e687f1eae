//! A budget: at most N, or N% of the selected nodes (`--max-cordoned`, the breaker's thresholds,
//! per-domain budgets). Pure.

/// At most this many (or this share of selected) nodes cordoned by us at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    Count(usize),
    Percent(f64),
}

impl Budget {
    /// Whether this budget is at most `ceiling` (None: a count and a percentage, which compare
    /// only against a fleet's size).
    pub(crate) fn within(&self, ceiling: &Budget) -> Option<bool> {
        match (*self, *ceiling) {
            (Budget::Count(a), Budget::Count(b)) => Some(a <= b),
            (Budget::Percent(a), Budget::Percent(b)) => Some(a <= b),
            _ => None,
        }
    }

    /// The limit for `selected` nodes; a percentage never rounds below 1.
    pub(crate) fn limit(&self, selected: usize) -> usize {
        match *self {
            Budget::Count(n) => n,
            Budget::Percent(p) => ((selected as f64 * p / 100.0).floor() as usize).max(1),
        }
    }
}

/// A budget that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("budget {0:?}: not a percentage")]
    NotAPercentage(String),
    #[error("budget {0:?}: a percentage must be in (0, 100]")]
    PercentOutOfRange(String),
    #[error("budget {0:?}: expected N or N%")]
    NotACount(String),
    #[error("budget {0:?}: must be at least 1")]
    Zero(String),
}

impl std::str::FromStr for Budget {
    type Err = BudgetError;
    fn from_str(s: &str) -> Result<Self, BudgetError> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| BudgetError::NotAPercentage(s.into()))?;
            if !(0.0..=100.0).contains(&p) || p == 0.0 {
                return Err(BudgetError::PercentOutOfRange(s.into()));
            }
            Ok(Budget::Percent(p))
        } else {
            let n: usize = s.parse().map_err(|_| BudgetError::NotACount(s.into()))?;
            if n == 0 {
                return Err(BudgetError::Zero(s.into()));
            }
            Ok(Budget::Count(n))
        }
    }
}

impl std::fmt::Display for Budget {
    /// As it is written: `3` or `30%`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Count(n) => write!(f, "{n}"),
            Budget::Percent(p) => write!(f, "{p}%"),
        }
    }
}
