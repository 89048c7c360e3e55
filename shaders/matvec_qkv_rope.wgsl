// matvec.wgsl's output for one weight holding the rows of Q, K and V (as
// matvec_qkv.wgsl: c.x = rows of Q, c.y = rows of Q and K, each sum also
// into yq, yk or yv), which also does FusedRopeAppend's work for one token:
// RoPE of q into q_out, RoPE of k into the key cache, v into the value cache.
// RoPE style normal only (pairs 2i, 2i + 1 of a head, which a workgroup's
// four rows hold, as c.x, c.y and the head size d are even).
// d = (head size d, rotated dims, cos/sin table row), e = (first key slot,
// first value slot) in the caches; the tables hold rotated / 2 values a row.
@group(0) @binding(2) var<storage, read_write> yq: array<f32>;
@group(0) @binding(3) var<storage, read_write> yk: array<f32>;
@group(0) @binding(4) var<storage, read_write> yv: array<f32>;
@group(0) @binding(5) var<storage, read> cs: array<f32>;
@group(0) @binding(6) var<storage, read> sn: array<f32>;
@group(0) @binding(7) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(8) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(9) var<storage, read_write> v_cache: array<f32>;
@group(0) @binding(10) var<uniform> p: Params;

fn mv_rows(g: u32) -> vec4<u32> {
    return consecutive_rows(g);
}

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

fn mv_store(g: u32, v: vec4<f32>) {
    let n0 = g * NR;
    for (var r = 0u; r < NR; r++) {
        let n = n0 + r;
        if n < p.c.x {
            yq[n] = v[r];
            q_out[n] = rotated(v, r, n % p.d.x);
        } else if n < p.c.y {
            let i = n - p.c.x;
            yk[i] = v[r];
            k_cache[p.e.x + i] = rotated(v, r, i % p.d.x);
        } else if n < p.a.y {
            let i = n - p.c.y;
            yv[i] = v[r];
            v_cache[p.e.y + i] = v[r];
        }
    }
}
