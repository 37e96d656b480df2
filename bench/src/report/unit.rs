//! How a figure is shown: its unit and decimals, alone or as `median [min-max]`.

use crate::stats::Spread;

/// How a figure is shown.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    /// Recorded in microseconds, shown in milliseconds with two decimals.
    Ms,
    /// A whole number.
    Whole,
    /// A number with this many decimals.
    Dec(usize),
}

impl Unit {
    pub fn fmt(self, v: f64) -> String {
        match self {
            Unit::Ms => format!("{:.2}", v / 1000.0),
            Unit::Whole => format!("{v:.0}"),
            Unit::Dec(d) => format!("{v:.d$}"),
        }
    }

    /// The value, or `-` when there is none.
    pub fn opt(self, v: Option<f64>) -> String {
        v.map_or("-".to_owned(), |v| self.fmt(v))
    }

    /// `median [min-max]`, or the one value of a single round.
    pub fn spread(self, s: &Spread) -> String {
        if s.rounds == 1 {
            self.fmt(s.median)
        } else {
            format!(
                "{} [{}-{}]",
                self.fmt(s.median),
                self.fmt(s.min),
                self.fmt(s.max)
            )
        }
    }
}

/// A ratio as the report shows it (`1.23x`), or `-`.
pub fn times(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}x"))
}
