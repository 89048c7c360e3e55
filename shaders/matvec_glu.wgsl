// matvec.wgsl's output for one weight holding the gate rows and then the up
// rows (c.x = rows of each): a workgroup computes gate rows j0, j0 + 1 and the
// same up rows, and stores silu(gate) * up (SwiGLU) at j0, j0 + 1.
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn mv_rows(g: u32) -> vec4<u32> {
    let j = min(vec2<u32>(2u * g) + vec2<u32>(0u, 1u), vec2<u32>(p.c.x - 1u));
    return vec4<u32>(j, j + vec2<u32>(p.c.x));
}

fn mv_store(g: u32, v: vec4<f32>) {
    for (var r = 0u; r < 2u; r++) {
        let j = 2u * g + r;
        if j < p.c.x {
            y[j] = v[r] / (1.0 + exp(-v[r])) * v[r + 2u];
        }
    }
}
