// matvec_qkv.wgsl's ending that also does FusedRopeAppend's work for one
// token: RoPE of q into q_out, RoPE of k into the key cache, v into the value
// cache. RoPE style normal only (pairs 2i, 2i + 1 of a head, which a
// workgroup's four rows hold, as c.x, c.y and the head size d are even).
// d = (head size d, rotated dims, cos/sin table row), e = (first key slot,
// first value slot) in the caches; the tables hold rotated / 2 values a row.
@group(0) @binding(5) var<storage, read> cs: array<f32>;
@group(0) @binding(6) var<storage, read> sn: array<f32>;
@group(0) @binding(7) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(8) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(9) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(10) var<uniform> p: Params;

// Row r of the four (sums v) rotated, where j is its index in its head:
// (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos) for the pair it is in.
fn rotated(v: vec4<f32>, r: u32, j: u32) -> f32 {
    if j >= p.d.y {
        return v[r];
    }
    let t = p.d.z * (p.d.y / 2u) + j / 2u;
    let c = cs[t];
    let s = sn[t];
    let first = r & ~1u;
    let x0 = v[first];
    let x1 = v[first + 1u];
    return select(x0 * s + x1 * c, x0 * c - x1 * s, (r & 1u) == 0u);
}

fn qkv_also(region: u32, i: u32, r: u32, v: vec4<f32>) {
    switch region {
        case 0u: { q_out[i] = rotated(v, r, i % p.d.x); }
        case 1u: { k_cache[p.e.x + i] = rotated(v, r, i % p.d.x); }
        default: { v_cache[p.e.y + i] = v[r]; }
    }
}
