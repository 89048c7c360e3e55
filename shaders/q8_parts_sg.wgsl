// q8_parts.wgsl's block through subgroup shuffles (SUBGROUP feature; lanes in
// invocation order, subgroups a multiple of 8 wide): the eight threads that
// hold a block (thread t holds values 4j .. 4j + 3, j = t % 8) are eight
// consecutive lanes, which gather its max|x|, finiteness and integer sum in
// three butterfly steps each, with no workgroup memory and no barrier. Same
// values as q8_store. Every thread of the workgroup calls it; `live` is false
// for threads whose four values belong to no block. The includer defines `xq`.
fn q8_max8(v: f32) -> f32 {
    var m = max(v, subgroupShuffleXor(v, 1u));
    m = max(m, subgroupShuffleXor(m, 2u));
    return max(m, subgroupShuffleXor(m, 4u));
}

fn q8_add8(v: f32) -> f32 {
    var s = v + subgroupShuffleXor(v, 1u);
    s += subgroupShuffleXor(s, 2u);
    return s + subgroupShuffleXor(s, 4u);
}

fn q8_addi8(v: i32) -> i32 {
    var s = v + subgroupShuffleXor(v, 1u);
    s += subgroupShuffleXor(s, 2u);
    return s + subgroupShuffleXor(s, 4u);
}

fn q8_store_parts(b: u32, t: u32, v: vec4<f32>, live: bool, nan: f32) {
    let a = abs(v);
    let amax = q8_max8(select(0.0, max(max(a.x, a.y), max(a.z, a.w)), live));
    let total = q8_add8(select(0.0, a.x + a.y + a.z + a.w, live));
    let q = q8_quant4(v, amax);
    let sum = q8_addi8(select(0, q.x + q.y + q.z + q.w, live));
    if live {
        q8_put_part(b, t & 7u, q, amax, total, sum, nan);
    }
}
