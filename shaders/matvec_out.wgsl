// matvec.wgsl's plain output: rows n0 .. n0 + NR of the chunk into y[b.x + n],
// where b.x is the chunk's first row (b.y unused).
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn mv_rows(g: u32) -> vec4<u32> {
    return consecutive_rows(g);
}

fn mv_store(g: u32, v: vec4<f32>) {
    let n0 = g * NR;
    for (var r = 0u; r < NR; r++) {
        if n0 + r < p.a.y {
            y[p.b.x + n0 + r] = v[r];
        }
    }
}
