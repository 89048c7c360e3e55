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
