package needle.peer;

import com.yahoo.bullet.common.BulletConfig;
import com.yahoo.bullet.pubsub.Metadata;
import com.yahoo.bullet.query.Query;
import com.yahoo.bullet.querying.Querier;
import com.yahoo.bullet.querying.QueryCategorizer;
import com.yahoo.bullet.querying.QueryManager;
import com.yahoo.bullet.querying.RunningQuery;
import com.yahoo.bullet.record.BulletRecord;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One pass of records through queries with Bullet's own engine, in one thread, in one of two modes.
 *
 * <p>{@code filter} is what a Bullet 1.x Filter bolt does for each record tuple: its QueryManager holds one
 * PARTITION-mode Querier per query, and {@code categorize(record)} gives the record to every query
 * ({@code Querier.consume}) and sorts them into done (emit {@code getData()}, remove), rate limited (remove) and
 * closed (emit {@code getData()}, {@code reset()}). The emitted bytes are what the Join bolt receives: after the
 * timed loop, each query's bytes are combined into one ALL-mode Querier, as the Join bolt does, and its
 * {@code getResult()} is the query's result.
 *
 * <p>{@code querier} is the bare engine: one ALL-mode Querier per query, {@code consume(record)} for every record
 * until {@code isDone()}, then {@code getResult()}.
 */
final class BulletEngine {
    enum Mode { FILTER, QUERIER }

    /** What one pass measured and produced. */
    static final class Pass {
        long nanos;
        /** CPU time of this thread over the same loop (the machine may be shared: wall time includes waiting). */
        long cpuNanos;
        /** Per query: the records of its result. */
        List<List<BulletRecord>> results = new ArrayList<>();
        /** Queries that ended because their duration ran out during the pass (the run was longer than them). */
        int timedOut;
        /** Queries removed for exceeding the rate limit (0 unless the limit is enabled). */
        int rateLimited;
    }

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private final BulletConfig config;
    private final List<Query> queries;
    private final Mode mode;

    BulletEngine(BulletConfig config, List<Query> queries, Mode mode) {
        this.config = config;
        this.queries = queries;
        this.mode = mode;
    }

    /** Runs every record through every query, timing only the record loop. */
    Pass run(List<BulletRecord> records) {
        return mode == Mode.FILTER ? runFilter(records) : runQuerier(records);
    }

    private static String id(int i) {
        return "q" + i;
    }

    private Querier newQuerier(Querier.Mode querierMode, int i) {
        return new Querier(querierMode, new RunningQuery(id(i), queries.get(i), new Metadata()), config);
    }

    private Pass runFilter(List<BulletRecord> records) {
        int n = queries.size();
        QueryManager manager = new QueryManager(config);
        for (int i = 0; i < n; i++) {
            manager.addQuery(id(i), newQuerier(Querier.Mode.PARTITION, i));
        }
        // What the Filter bolt would emit to the Join bolt, per query, in order.
        List<List<byte[]>> emitted = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            emitted.add(new ArrayList<>());
        }
        Pass pass = new Pass();

        long cpuStart = THREADS.getCurrentThreadCpuTime();
        long start = System.nanoTime();
        for (BulletRecord record : records) {
            QueryCategorizer category = manager.categorize(record);
            Map<String, Querier> done = category.getDone();
            if (!done.isEmpty()) {
                for (Map.Entry<String, Querier> e : done.entrySet()) {
                    emit(emitted, e.getKey(), e.getValue().getData());
                    if (e.getValue().getRunningQuery().isTimedOut()) {
                        pass.timedOut++;
                    }
                }
                manager.removeQueries(done.keySet());
            }
            Map<String, Querier> rateLimited = category.getRateLimited();
            if (!rateLimited.isEmpty()) {
                pass.rateLimited += rateLimited.size();
                manager.removeQueries(rateLimited.keySet());
            }
            Map<String, Querier> closed = category.getClosed();
            if (!closed.isEmpty()) {
                for (Map.Entry<String, Querier> e : closed.entrySet()) {
                    emit(emitted, e.getKey(), e.getValue().getData());
                    e.getValue().reset();
                }
            }
        }
        pass.nanos = System.nanoTime() - start;
        pass.cpuNanos = THREADS.getCurrentThreadCpuTime() - cpuStart;

        // End of the stream: the queries still running give what they hold, as the Filter bolt does when a tick
        // finds a query done.
        for (int i = 0; i < n; i++) {
            Querier querier = manager.getQuery(id(i));
            if (querier != null) {
                emit(emitted, id(i), querier.getData());
            }
        }
        // The Join bolt's side: combine everything a query emitted into one ALL-mode Querier.
        for (int i = 0; i < n; i++) {
            Querier join = newQuerier(Querier.Mode.ALL, i);
            for (byte[] data : emitted.get(i)) {
                if (join.isDone()) {
                    break;
                }
                join.combine(data);
            }
            pass.results.add(join.getResult().getRecords());
        }
        return pass;
    }

    private static void emit(List<List<byte[]>> emitted, String id, byte[] data) {
        if (data != null) {
            emitted.get(Integer.parseInt(id.substring(1))).add(data);
        }
    }

    private Pass runQuerier(List<BulletRecord> records) {
        int n = queries.size();
        Querier[] queriers = new Querier[n];
        for (int i = 0; i < n; i++) {
            queriers[i] = newQuerier(Querier.Mode.ALL, i);
        }
        boolean[] done = new boolean[n];
        Pass pass = new Pass();

        long cpuStart = THREADS.getCurrentThreadCpuTime();
        long start = System.nanoTime();
        for (BulletRecord record : records) {
            for (int i = 0; i < n; i++) {
                if (!done[i]) {
                    Querier querier = queriers[i];
                    querier.consume(record);
                    if (querier.isDone()) {
                        done[i] = true;
                    }
                }
            }
        }
        pass.nanos = System.nanoTime() - start;
        pass.cpuNanos = THREADS.getCurrentThreadCpuTime() - cpuStart;

        for (int i = 0; i < n; i++) {
            if (done[i] && queriers[i].getRunningQuery().isTimedOut()) {
                pass.timedOut++;
            }
            pass.results.add(queriers[i].getResult().getRecords());
        }
        return pass;
    }
}
