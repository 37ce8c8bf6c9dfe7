package needle.peer;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.yahoo.bullet.bql.BQLResult;
import com.yahoo.bullet.bql.BulletQueryBuilder;
import com.yahoo.bullet.common.BulletConfig;
import com.yahoo.bullet.common.BulletError;
import com.yahoo.bullet.query.Query;
import com.yahoo.bullet.record.BulletRecord;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * needle's Bullet peer: runs BQL queries over an NDJSON file with Bullet's own engine (bullet-core, bullet-bql,
 * bullet-record from Maven Central), every record through every query in one thread as a Filter bolt does, and
 * reports records/s.
 *
 * <pre>
 * java -jar bullet-peer.jar --records FILE.ndjson --queries FILE.bql [--repeat N] [--warmup N]
 *                           [--mode filter|querier] [--record avro|simple] [--format json|table]
 * </pre>
 */
public final class BulletPeer {
    static final String USAGE =
            "usage: BulletPeer --records FILE.ndjson --queries FILE.bql [--repeat N] [--warmup N]\n"
            + "                  [--mode filter|querier] [--record avro|simple] [--decode setters|typed]\n"
            + "                  [--format json|table]\n"
            + "  --repeat N   timed passes over the records (default 3)\n"
            + "  --warmup N   untimed passes first, for the JIT (default: enough for 200,000 record x query\n"
            + "               evaluations, at least 1, at most 50)\n"
            + "  --mode       filter: a Filter bolt's QueryManager.categorize(record) (default);\n"
            + "               querier: bare Querier.consume(record) until isDone()\n"
            + "  --record     the Bullet record class: avro = TypedAvroBulletRecord (Bullet's default), simple =\n"
            + "               TypedSimpleBulletRecord\n"
            + "  --decode     setters: the typed setters (setString, setStringMap...), Bullet infers each type (default);\n"
            + "               typed: typedSet(field, new TypedObject(type, value)) with the type JSON gave\n"
            + "  --format     json: one JSON line with the figures and every query's result records;\n"
            + "               table: a short human summary (default)\n";

    /** Command line options. */
    static final class Options {
        Path records;
        Path queries;
        int repeat = 3;
        int warmup = -1;
        BulletEngine.Mode mode = BulletEngine.Mode.FILTER;
        String record = "avro";
        boolean explicitTypes;
        String format = "table";

        static Options parse(String[] args) {
            Options o = new Options();
            for (int i = 0; i < args.length; i++) {
                String arg = args[i];
                if (arg.equals("-h") || arg.equals("--help")) {
                    throw new UsageException("");
                }
                if (i + 1 >= args.length) {
                    throw new UsageException(arg + " needs a value");
                }
                String value = args[++i];
                switch (arg) {
                    case "--records": o.records = Path.of(value); break;
                    case "--queries": o.queries = Path.of(value); break;
                    case "--repeat": o.repeat = positive(arg, value, 1); break;
                    case "--warmup": o.warmup = positive(arg, value, 0); break;
                    case "--mode": o.mode = mode(value); break;
                    case "--record":
                        if (!PeerConfig.RECORD_PROVIDERS.containsKey(value)) {
                            throw new UsageException("--record must be one of " + PeerConfig.RECORD_PROVIDERS.keySet());
                        }
                        o.record = value;
                        break;
                    case "--decode":
                        if (!value.equals("setters") && !value.equals("typed")) {
                            throw new UsageException("--decode must be setters or typed");
                        }
                        o.explicitTypes = value.equals("typed");
                        break;
                    case "--format":
                        if (!value.equals("json") && !value.equals("table")) {
                            throw new UsageException("--format must be json or table");
                        }
                        o.format = value;
                        break;
                    default: throw new UsageException("unknown option " + arg);
                }
            }
            if (o.records == null || o.queries == null) {
                throw new UsageException("--records and --queries are required");
            }
            return o;
        }

        private static int positive(String arg, String value, int min) {
            try {
                int n = Integer.parseInt(value);
                if (n >= min) {
                    return n;
                }
            } catch (NumberFormatException ignored) {
                // reported below
            }
            throw new UsageException(arg + " must be an integer >= " + min + ", not " + value);
        }

        private static BulletEngine.Mode mode(String value) {
            switch (value) {
                case "filter": return BulletEngine.Mode.FILTER;
                case "querier": return BulletEngine.Mode.QUERIER;
                default: throw new UsageException("--mode must be filter or querier");
            }
        }
    }

    static final class UsageException extends RuntimeException {
        UsageException(String message) {
            super(message);
        }
    }

    /** Everything a run measured and produced. */
    static final class Report {
        int queries;
        int records;
        int warmupPasses;
        int timedPasses;
        double recordsPerSec;
        double bestPassRecordsPerSec;
        double recordsPerCpuSec;
        double decodeRecordsPerSec;
        double decodeRecordsPerCpuSec;
        /** Records decoded in the timed decoding passes. */
        long decodeTimedRecords;
        int timedOut;
        int rateLimited;
        List<List<Map<String, Object>>> results = new ArrayList<>();
    }

    /** Records decoded in the timed decoding passes (at least one pass over every line). */
    static final int DECODE_TIMED_RECORDS = 20_000;

    /** Where each decoded record of the timed decoding passes goes, so that the JIT cannot drop the work. */
    @SuppressWarnings("unused")
    private static volatile BulletRecord sink;

    private BulletPeer() {
    }

    public static void main(String[] args) {
        Options options;
        try {
            options = Options.parse(args);
        } catch (UsageException e) {
            if (e.getMessage().isEmpty()) {
                System.out.print(USAGE);
                System.exit(0);
            }
            System.err.println("error: " + e.getMessage());
            System.err.print(USAGE);
            System.exit(2);
            return;
        }
        try {
            Report report = run(options);
            print(report, options, System.out);
            if (report.timedOut > 0) {
                System.err.println("warning: " + report.timedOut + " query runs ended on their duration during a "
                                   + "timed pass; records/s covers a smaller workload than asked");
            }
        } catch (IOException | IllegalArgumentException | IllegalStateException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(1);
        }
    }

    /** Reads the query file: one BQL query per line, blank lines and lines starting with "--" ignored. */
    static List<String> readQueries(Path file) throws IOException {
        List<String> queries = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            String trimmed = line.trim();
            if (!trimmed.isEmpty() && !trimmed.startsWith("--")) {
                queries.add(trimmed);
            }
        }
        return queries;
    }

    /** Compiles every BQL query with bullet-bql; any error stops the run, naming the query. */
    static List<Query> compile(List<String> bql, BulletConfig config) {
        BulletQueryBuilder builder = new BulletQueryBuilder(config);
        List<Query> queries = new ArrayList<>(bql.size());
        for (int i = 0; i < bql.size(); i++) {
            BQLResult result = builder.buildQuery(bql.get(i));
            if (result.hasErrors()) {
                StringBuilder message = new StringBuilder("query " + (i + 1) + " does not compile: " + bql.get(i));
                for (BulletError error : result.getErrors()) {
                    message.append("\n  ").append(error.getError());
                    for (String resolution : error.getResolutions()) {
                        message.append("\n    ").append(resolution);
                    }
                }
                throw new IllegalArgumentException(message.toString());
            }
            Query query = result.getQuery();
            if (query.getWindow() != null && query.getWindow().getEmitType() != null) {
                // A windowed query emits one result per window, and the peer reports one result per query.
                throw new IllegalArgumentException("query " + (i + 1) + " has a WINDOW clause, which the peer does "
                                                   + "not support (it reports one final result per query): "
                                                   + bql.get(i));
            }
            queries.add(query);
        }
        return queries;
    }

    static Report run(Options options) throws IOException {
        BulletConfig config = PeerConfig.create(options.record);
        List<Query> queries = compile(readQueries(options.queries), config);
        if (queries.isEmpty()) {
            throw new IllegalArgumentException("no queries in " + options.queries);
        }

        List<String> lines = new ArrayList<>();
        for (String line : Files.readAllLines(options.records, StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                lines.add(line);
            }
        }
        if (lines.isEmpty()) {
            throw new IllegalArgumentException("no records in " + options.records);
        }

        // Decoding, as a Filter bolt meets it: each record is built, used and dropped, so the timed passes keep no
        // record (keeping 20,000 records of ~20 KB of heap each would time the heap's growth and the copying of
        // live records by the GC, which a stream never pays). An untimed warm-up over (up to) the first 10,000
        // lines for the JIT, then timed passes over every line until DECODE_TIMED_RECORDS records are decoded
        // (at least one pass); then, untimed, the records the queries see.
        RecordDecoder decoder = new RecordDecoder(config.getBulletRecordProvider(), options.explicitTypes);
        for (int i = 0; i < Math.min(lines.size(), 10_000); i++) {
            sink = decoder.decode(lines.get(i));
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        int decodePasses = Math.max(1, (DECODE_TIMED_RECORDS + lines.size() - 1) / lines.size());
        long decodeCpuStart = threads.getCurrentThreadCpuTime();
        long decodeStart = System.nanoTime();
        for (int pass = 0; pass < decodePasses; pass++) {
            for (String line : lines) {
                sink = decoder.decode(line);
            }
        }
        long decodeNanos = System.nanoTime() - decodeStart;
        long decodeCpuNanos = threads.getCurrentThreadCpuTime() - decodeCpuStart;
        sink = null;
        List<BulletRecord> records = new ArrayList<>(lines.size());
        for (String line : lines) {
            records.add(decoder.decode(line));
        }

        BulletEngine engine = new BulletEngine(config, queries, options.mode);
        Report report = new Report();
        report.queries = queries.size();
        report.records = records.size();
        report.decodeTimedRecords = (long) records.size() * decodePasses;
        report.decodeRecordsPerSec = (double) records.size() * decodePasses * 1e9 / decodeNanos;
        report.decodeRecordsPerCpuSec = (double) records.size() * decodePasses * 1e9 / decodeCpuNanos;
        long evaluations = (long) records.size() * queries.size();
        report.warmupPasses = options.warmup >= 0 ? options.warmup
                : (int) Math.max(1, Math.min(50, (200_000 + evaluations - 1) / evaluations));
        report.timedPasses = options.repeat;

        for (int i = 0; i < report.warmupPasses; i++) {
            engine.run(records);
        }
        long totalNanos = 0;
        long totalCpuNanos = 0;
        long bestNanos = Long.MAX_VALUE;
        BulletEngine.Pass last = null;
        for (int i = 0; i < options.repeat; i++) {
            last = engine.run(records);
            totalNanos += last.nanos;
            totalCpuNanos += last.cpuNanos;
            bestNanos = Math.min(bestNanos, last.nanos);
            report.timedOut += last.timedOut;
            report.rateLimited += last.rateLimited;
        }
        report.recordsPerSec = (double) records.size() * options.repeat * 1e9 / totalNanos;
        report.bestPassRecordsPerSec = records.size() * 1e9 / bestNanos;
        report.recordsPerCpuSec = (double) records.size() * options.repeat * 1e9 / totalCpuNanos;
        for (List<BulletRecord> result : last.results) {
            List<Map<String, Object>> rows = new ArrayList<>(result.size());
            for (BulletRecord record : result) {
                rows.add(new LinkedHashMap<>(record.toUnmodifiableDataMap()));
            }
            report.results.add(rows);
        }
        return report;
    }

    static void print(Report report, Options options, PrintStream out) throws IOException {
        if (options.format.equals("json")) {
            Map<String, Object> json = new LinkedHashMap<>();
            json.put("queries", report.queries);
            json.put("records", report.records);
            json.put("records_per_sec", Math.round(report.recordsPerSec));
            json.put("decode_records_per_sec", Math.round(report.decodeRecordsPerSec));
            json.put("best_pass_records_per_sec", Math.round(report.bestPassRecordsPerSec));
            json.put("records_per_cpu_sec", Math.round(report.recordsPerCpuSec));
            json.put("decode_records_per_cpu_sec", Math.round(report.decodeRecordsPerCpuSec));
            json.put("decode_timed_records", report.decodeTimedRecords);
            json.put("mode", options.mode.name().toLowerCase(Locale.ROOT));
            json.put("record", options.record);
            json.put("decode", options.explicitTypes ? "typed" : "setters");
            json.put("warmup_passes", report.warmupPasses);
            json.put("timed_passes", report.timedPasses);
            json.put("timed_out", report.timedOut);
            json.put("rate_limited", report.rateLimited);
            json.put("results", report.results);
            out.println(new ObjectMapper().writeValueAsString(json));
            return;
        }
        out.printf(Locale.ROOT, "bullet-core 1.5.2 peer  mode=%s  record=%s  decode=%s  passes=%d timed + %d warm-up%n",
                   options.mode.name().toLowerCase(Locale.ROOT), options.record,
                   options.explicitTypes ? "typed" : "setters", report.timedPasses, report.warmupPasses);
        out.printf(Locale.ROOT, "%-28s %,14d%n", "queries", report.queries);
        out.printf(Locale.ROOT, "%-28s %,14d%n", "records", report.records);
        out.printf(Locale.ROOT, "%-28s %,14.0f%n", "records/s (all timed passes)", report.recordsPerSec);
        out.printf(Locale.ROOT, "%-28s %,14.0f%n", "records/s (best pass)", report.bestPassRecordsPerSec);
        out.printf(Locale.ROOT, "%-28s %,14.0f%n", "records/CPU-s (timed passes)", report.recordsPerCpuSec);
        out.printf(Locale.ROOT, "%-28s %,14.0f%n", "decode records/s", report.decodeRecordsPerSec);
        out.printf(Locale.ROOT, "%-28s %,14.0f%n", "decode records/CPU-s", report.decodeRecordsPerCpuSec);
        int shown = Math.min(report.results.size(), 10);
        for (int i = 0; i < shown; i++) {
            out.printf(Locale.ROOT, "query %-4d result records: %d%n", i + 1, report.results.get(i).size());
        }
        if (shown < report.results.size()) {
            out.printf(Locale.ROOT, "(%d more queries)%n", report.results.size() - shown);
        }
    }
}
