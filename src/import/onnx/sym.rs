//! Import-time dimensions and integer values: a known number, or a multiple
//! of one symbolic dimension of the graph's inputs (`batch`, `2 * batch`).
//! Shape arithmetic over these is folded at import; what cannot be written
//! this way is an error naming the node.

use std::fmt;

/// `coef` alone, or `coef * var`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sym {
    /// The factor (the value itself when `var` is none).
    pub coef: i64,
    /// The symbolic dimension, if any.
    pub var: Option<String>,
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.var, self.coef) {
            (None, c) => write!(f, "{c}"),
            (Some(v), 1) => write!(f, "{v}"),
            (Some(v), c) => write!(f, "{c}*{v}"),
        }
    }
}

impl Sym {
    /// A known value.
    pub fn known(v: i64) -> Sym {
        Sym { coef: v, var: None }
    }

    /// The symbolic dimension `name`.
    pub fn var(name: &str) -> Sym {
        Sym {
            coef: 1,
            var: Some(name.to_string()),
        }
    }

    /// The value when known.
    pub fn value(&self) -> Option<i64> {
        self.var.is_none().then_some(self.coef)
    }

    /// The value as a dimension when known and >= 0.
    pub fn dim(&self) -> Option<usize> {
        self.value().and_then(|v| usize::try_from(v).ok())
    }

    /// `self * other`, when at most one of them is symbolic (and no overflow).
    pub fn mul(&self, other: &Sym) -> Option<Sym> {
        match (&self.var, &other.var) {
            (Some(_), Some(_)) => None,
            (v, None) | (None, v) => Some(Sym {
                coef: self.coef.checked_mul(other.coef)?,
                var: v.clone(),
            }),
        }
    }

    /// `self / other` (truncating), when exact or both known.
    pub fn div(&self, other: &Sym) -> Option<Sym> {
        match (&self.var, &other.var) {
            (None, None) if other.coef != 0 => Some(Sym::known(self.coef.checked_div(other.coef)?)),
            (Some(a), Some(b)) if a == b && other.coef != 0 && self.coef % other.coef == 0 => {
                Some(Sym::known(self.coef / other.coef))
            }
            (Some(_), None) if other.coef != 0 && self.coef % other.coef == 0 => Some(Sym {
                coef: self.coef / other.coef,
                var: self.var.clone(),
            }),
            _ => None,
        }
    }

    /// `self + other` (or `-` with `sign = -1`), when both are known or
    /// multiples of the same dimension, or `other` is 0.
    pub fn add(&self, other: &Sym, sign: i64) -> Option<Sym> {
        if other.value() == Some(0) {
            return Some(self.clone());
        }
        match (&self.var, &other.var) {
            (None, None) => Some(Sym::known(
                self.coef.checked_add(sign.checked_mul(other.coef)?)?,
            )),
            (Some(a), Some(b)) if a == b => {
                let coef = self.coef.checked_add(sign.checked_mul(other.coef)?)?;
                Some(if coef == 0 {
                    Sym::known(0)
                } else {
                    Sym {
                        coef,
                        var: Some(a.clone()),
                    }
                })
            }
            _ => None,
        }
    }

    /// `num` / `den` as products of dims, equal symbolic dims cancelled first
    /// (`[b, 29, T] / [b, T]` is 29), when the rest divides exactly.
    pub fn ratio(num: &[Sym], den: &[Sym]) -> Option<Sym> {
        let mut num = num.to_vec();
        let mut rest = Vec::with_capacity(den.len());
        for d in den {
            match num.iter().position(|n| n == d && d.var.is_some()) {
                Some(i) => {
                    num.remove(i);
                }
                None => rest.push(d.clone()),
            }
        }
        Sym::product(&num)?.div(&Sym::product(&rest)?)
    }

    /// The product of `dims`, when at most one is symbolic.
    pub fn product(dims: &[Sym]) -> Option<Sym> {
        dims.iter().try_fold(Sym::known(1), |acc, d| acc.mul(d))
    }
}
