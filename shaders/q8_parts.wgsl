// q8_block.wgsl's block written by the eight threads that hold its values:
// thread t holds values 4j .. 4j + 3 (j = t % 8) of block b, so the block's
// max|x|, its finiteness and its integer sum are gathered through workgroup
// memory instead of one thread walking 32 values. Same values as q8_store.
// Every thread of the workgroup calls it (it synchronizes the workgroup);
// `live` is false for threads whose four values belong to no block. The
// includer defines Q8_WG (its workgroup size, a multiple of 8) and `xq`.
var<workgroup> q8_amax: array<f32, Q8_WG>;
var<workgroup> q8_total: array<f32, Q8_WG>;
var<workgroup> q8_sum: array<i32, Q8_WG>;

fn q8_store_parts(b: u32, t: u32, v: vec4<f32>, live: bool, nan: f32) {
    let j = t & 7u;
    let first = t - j;
    let a = abs(v);
    q8_amax[t] = select(0.0, max(max(a.x, a.y), max(a.z, a.w)), live);
    q8_total[t] = select(0.0, a.x + a.y + a.z + a.w, live);
    workgroupBarrier();
    var amax = 0.0;
    var total = 0.0;
    for (var i = 0u; i < 8u; i++) {
        amax = max(amax, q8_amax[first + i]);
        total += q8_total[first + i];
    }
    let q = q8_quant4(v, amax);
    q8_sum[t] = select(0, q.x + q.y + q.z + q.w, live);
    workgroupBarrier();
    var sum = 0;
    for (var i = 0u; i < 8u; i++) {
        sum += q8_sum[first + i];
    }
    if live {
        q8_put_part(b, j, q, amax, total, sum, nan);
    }
}
