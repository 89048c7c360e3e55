// mm_coop.wgsl's output for one weight holding the gate rows, then the up
// rows (c.y = rows of each): the workgroup's tile rows 0..63 are gate rows
// g * 64.., rows 64..127 the same up rows; a subgroup multiplies its input rows
// with 16 gate and the same 16 up rows and stores silu(gate) * up (SwiGLU)
// at y[r, c] (b.y = y's row stride) for r < M, c < c.y.
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const GLU_COLS: u32 = 64u;

fn coop_row(g: u32, i: u32) -> u32 {
    let n = p.c.y;
    if i < GLU_COLS {
        return min(g * GLU_COLS + i, n - 1u);
    }
    return n + min(g * GLU_COLS + i - GLU_COLS, n - 1u);
}

fn coop_b_rows(quad: u32) -> vec2<u32> {
    let s = (quad % 4u) * 16u;
    return vec2<u32>(s, GLU_COLS + s);
}

// silu(gate) * up for output rows r0.., columns c0.., through this subgroup's
// staging square (the gate sums held in registers while the up sums pass).
fn glu_square(gate: coop_mat16x16<f32, C>, up: coop_mat16x16<f32, C>, sq: u32, lane: u32, r0: u32, c0: u32) {
    coopStoreT(gate, &cs[sq * 256u], 16u);
    workgroupBarrier();
    var gv: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        gv[i] = cs[sq * 256u + lane + 32u * i];
    }
    workgroupBarrier();
    coopStoreT(up, &cs[sq * 256u], 16u);
    workgroupBarrier();
    for (var i = 0u; i < 8u; i++) {
        let e = lane + 32u * i;
        let r = r0 + e / 16u;
        let c = c0 + e % 16u;
        if r < p.a.x && c < p.c.y {
            y[r * p.b.y + c] = gv[i] / (1.0 + exp(-gv[i])) * cs[sq * 256u + e];
        }
    }
    workgroupBarrier();
}

fn coop_store(
    c00: coop_mat16x16<f32, C>,
    c01: coop_mat16x16<f32, C>,
    c10: coop_mat16x16<f32, C>,
    c11: coop_mat16x16<f32, C>,
    quad: u32,
    lane: u32,
    r0: u32,
    g: u32,
) {
    let c0 = g * GLU_COLS + (quad % 4u) * 16u;
    glu_square(c00, c01, quad, lane, r0, c0);
    glu_square(c10, c11, quad, lane, r0 + 16u, c0);
}
