// mm_coop.wgsl's tile as output columns: tile row i is weight row
// g * BN + i (clamped to the N used), a subgroup's quadrant is tile rows
// qn..qn+31, and sum (r, c) goes to `coop_put(r, c, v)` for r < M, c < N.

fn coop_row(g: u32, i: u32) -> u32 {
    return min(g * BN + i, p.a.y - 1u);
}

fn coop_b_rows(quad: u32) -> vec2<u32> {
    let qn = (quad % 4u) * 32u;
    return vec2<u32>(qn, qn + 16u);
}

// Accumulator `acc` (output rows r0.., columns c0..) through this subgroup's
// staging square, skipping rows past M and columns past N.
fn store_square(acc: coop_mat16x16<f32, C>, sq: u32, lane: u32, r0: u32, c0: u32) {
    coopStoreT(acc, &cs[sq * 256u], 16u);
    workgroupBarrier();
    for (var e = lane; e < 256u; e += 32u) {
        let r = r0 + e / 16u;
        let c = c0 + e % 16u;
        if r < p.a.x && c < p.a.y {
            coop_put(r, c, cs[sq * 256u + e]);
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
    let c0 = g * BN + (quad % 4u) * 32u;
    store_square(c00, quad, lane, r0, c0);
    store_square(c01, quad, lane, r0, c0 + 16u);
    store_square(c10, quad, lane, r0 + 16u, c0);
    store_square(c11, quad, lane, r0 + 16u, c0 + 16u);
}
