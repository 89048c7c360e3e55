// matvec.wgsl's output for one weight holding the rows of Q, K and V one after
// the other (c.x = rows of Q, c.y = rows of Q and K): rows n0 .. n0 + NR, each
// sum into the output its row belongs to, then `qkv_also` (region 0, 1 or 2
// for Q, K or V; index in it; this row's place r among the NR sums v), which
// matvec_qkv_out.wgsl leaves empty and matvec_qkv_rope.wgsl uses; the file
// appended after this one also binds the parameters.
@group(0) @binding(2) var<storage, read_write> yq: array<f32>;
@group(0) @binding(3) var<storage, read_write> yk: array<f32>;
@group(0) @binding(4) var<storage, read_write> yv: array<f32>;

fn mv_rows(g: u32) -> vec4<u32> {
    return consecutive_rows(g);
}

fn mv_store(g: u32, v: vec4<f32>) {
    let n0 = g * NR;
    for (var r = 0u; r < NR; r++) {
        let n = n0 + r;
        if n < p.c.x {
            yq[n] = v[r];
            qkv_also(0u, n, r, v);
        } else if n < p.c.y {
            yk[n - p.c.x] = v[r];
            qkv_also(1u, n - p.c.x, r, v);
        } else if n < p.a.y {
            yv[n - p.c.y] = v[r];
            qkv_also(2u, n - p.c.y, r, v);
        }
    }
}
