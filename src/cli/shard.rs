//! `--shard K/N`: one command line as the K-th of N workers (a Kubernetes indexed
//! Job's `$JOB_COMPLETION_INDEX`, a SLURM array's `$SLURM_ARRAY_TASK_ID` over
//! `--array=0-(N-1)`) takes inputs K, K+N, K+2N, ... of the same list.

/// The K-th (0-based) of N shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This worker, `0..count`.
    pub index: usize,
    /// Workers in all.
    pub count: usize,
}

impl Shard {
    /// Parses `K/N` with `0 <= K < N`.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}` is not K/N (e.g. 0/4: the first of four workers)"))?;
        let index: usize = k
            .trim()
            .parse()
            .map_err(|_| format!("`{k}` in `{s}` is not a shard number"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` in `{s}` is not a shard count"))?;
        if count == 0 || index >= count {
            return Err(format!(
                "shard {index} of {count}: K counts from 0 and must be below N (0/{count} .. {}/{count})",
                count.saturating_sub(1)
            ));
        }
        Ok(Shard { index, count })
    }

    /// The items of this shard, in order.
    pub fn select<T>(self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .skip(self.index)
            .step_by(self.count)
            .collect()
    }

    /// The position in the whole list of this shard's `i`-th item.
    pub fn original(self, i: usize) -> usize {
        self.index + i * self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_list() {
        let all: Vec<usize> = (0..10).collect();
        let mut seen = Vec::new();
        for k in 0..3 {
            let s = Shard::parse(&format!("{k}/3")).unwrap();
            let mine = s.select(all.clone());
            for (i, &v) in mine.iter().enumerate() {
                assert_eq!(s.original(i), v);
            }
            seen.extend(mine);
        }
        seen.sort();
        assert_eq!(seen, all);
        for bad in ["3/3", "1/0", "a/2", "1", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
