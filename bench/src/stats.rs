//! Medians over rounds and their spread.

use serde::Serialize;

/// A figure over the rounds: its median (what the targets are judged on) and its spread.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Rounds that measured it.
    pub rounds: usize,
}

impl Spread {
    /// The spread of the values that were measured (`None`: none was).
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
        let mut v: Vec<f64> = values
            .into_iter()
            .flatten()
            .filter(|v| v.is_finite())
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            rounds: n,
        })
    }
}

/// The median of the values that were measured.
pub fn median(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    Spread::of(values).map(|s| s.median)
}

/// `a / b`, when both are known and `b` is positive.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts_skip_what_was_not_measured() {
        let s = Spread::of([Some(3.0), None, Some(1.0), Some(2.0)]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.rounds), (2.0, 1.0, 3.0, 3));
        assert_eq!(
            median([Some(4.0), Some(1.0), Some(2.0), Some(3.0)]),
            Some(2.5)
        );
        assert!(Spread::of([None, Some(f64::NAN)]).is_none());
    }
}
