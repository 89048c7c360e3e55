// Keys [lo, hi) that query row i (position q_pos + i) attends to, for the
// attention kernels' parameters: b = (dv, kv_len, q_pos, mask: 0 none,
// 1 causal, 2 sliding), c.x = window.
fn key_range(i: u32) -> vec2<u32> {
    let pos = p.b.z + i;
    var lo = 0u;
    var hi = p.b.y;
    if p.b.w >= 1u {
        hi = min(hi, pos + 1u);
    }
    if p.b.w == 2u && pos + 1u > p.c.x {
        lo = pos + 1u - p.c.x;
    }
    return vec2<u32>(lo, hi);
}

// The P V step's threads for dv output dimensions over a tile of `tile` keys
// in a workgroup of 256: one thread per dimension, two (each half of the
// tile's keys) when dv <= 128. Thread t takes dimension `dim` over keys
// half * keys .. + keys of the tile.
struct PvThreads {
    split: u32,
    dim: u32,
    half: u32,
    keys: u32,
}

fn pv_threads(t: u32, dv: u32, tile: u32) -> PvThreads {
    let split = select(1u, 2u, dv <= 128u);
    return PvThreads(split, t % (256u / split), t / (256u / split), tile / split);
}
