//! Repeated measurements of one quantity: median and spread.

#[derive(Clone, Debug, Default)]
pub struct Samples(Vec<f64>);

impl Samples {
    pub fn push(&mut self, value: f64) {
        self.0.push(value);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn sorted(&self) -> Vec<f64> {
        let mut values = self.0.clone();
        values.sort_by(f64::total_cmp);
        values
    }

    /// The middle value (the mean of the two middle ones for an even count).
    pub fn median(&self) -> f64 {
        let v = self.sorted();
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }

    pub fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }

    pub fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(f64::NAN)
    }

    /// `median (min–max)` with `decimals` places.
    pub fn show(&self, decimals: usize) -> String {
        if self.is_empty() {
            return "-".into();
        }
        format!(
            "{:.*} ({:.*}–{:.*})",
            decimals,
            self.median(),
            decimals,
            self.min(),
            decimals,
            self.max()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let mut s = Samples::default();
        for v in [3.0, 1.0, 2.0, 10.0] {
            s.push(v);
        }
        assert_eq!((s.median(), s.min(), s.max()), (2.5, 1.0, 10.0));
        s.push(0.5);
        assert_eq!(s.median(), 2.0);
        assert_eq!(s.show(1), "2.0 (0.5–10.0)");
    }
}
