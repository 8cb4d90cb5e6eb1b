import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import jep.Jep;
import jep.JepConfig;
import jep.JepException;
import jep.SharedInterpreter;
import jep.SubInterpreter;

/**
 * A stand-in for GROBID's JEP client (org.grobid.core.jni.JEPThreadPool + DeLFTModel), used by
 * tests/test_jep_grobid.py and benchmarks/jep_tagging.py. It reproduces GROBID's interpreter set-up,
 * start-up statements, model loading and labelling calls, and the Java-side cast of the result.
 *
 * Two GROBID lines:
 *   --mode sub     kermitt2/grobid 0.8: a jep.SubInterpreter(config), and "import numpy as np",
 *                  "import keras.backend as K" before the delft imports;
 *   --mode shared  grobidOrg/grobid: SharedInterpreter.setConfig(config) then new SharedInterpreter(),
 *                  without those two imports.
 * Both: JepConfig include paths = the delft folder and the venv's site-packages, Python's stdout/stderr
 * redirected to System.out/System.err, the context class loader; every Python call runs on ONE
 * executor thread that owns the interpreter (Executors.newSingleThreadExecutor()), as GROBID does.
 *
 * Usage:
 *   java -cp jep.jar:DIR -Djava.library.path=JEP_DIR GrobidLikeClient --mode sub|shared
 *        --delft DELFT_DIR --site-packages SITE_PACKAGES --models MODELS_DIR
 *        --model NAME:ARCHITECTURE [--model NAME:ARCHITECTURE ...] --input MATRIX_FILE
 *        [--calls one-call|per-sequence|both] [--per-sequence] [--repeat N] [--no-labels]
 *        [--mark-stderr] [--max-sequence-length N] [--batch-size N]
 *
 * NAME:ARCHITECTURE loads Sequence('NAME-ARCHITECTURE') from MODELS_DIR/NAME-ARCHITECTURE/ (GROBID's
 * fullModelName); the features are passed when ARCHITECTURE contains "FEATURE", as GROBID decides.
 * --calls per-sequence (or --per-sequence) makes one label() call per sequence of the input (GROBID
 * labels one date, one citation... per call); one-call (the default) labels the whole file in one
 * call; both does per-sequence then one-call. --repeat N labels the input N times per kind of call
 * (timing only; labels are printed for the first pass). --mark-stderr writes "# harness call N" on
 * stderr before each call (diagnosis of what the calls print). --max-sequence-length and
 * --batch-size are GROBID's runtime overrides from grobid.yaml, set on model_config after load.
 *
 * stdout, and only this: for each model "# model FULLNAME", then one line per input token
 * "TOKEN<TAB>GROBID_LABEL" (the token of the returned [token, label] pair, the label after
 * delft2grobidLabel), a blank line after each sequence; and "# timing KEY SECONDS [TOKENS]" lines.
 * Anything else on stdout was printed by Python. Violations of GROBID's expectations (a result that
 * is not List<List<List<String>>>, a missing pair, a token that differs from the input's first
 * column) are reported on stderr as "HARNESS VIOLATION: ..." and end in exit code 3; a Python
 * exception ends in exit code 2.
 */
public class GrobidLikeClient {

    // org.grobid.core.engines.label.TaggingLabels
    static final String IOB_START_ENTITY_LABEL_PREFIX = "B-";
    static final String IOB_INSIDE_LABEL_PREFIX = "I-";
    static final String IOB_OTHER_LABEL = "O";
    static final String GROBID_START_ENTITY_LABEL_PREFIX = "I-";
    static final String GROBID_INSIDE_ENTITY_LABEL_PREFIX = "";
    static final String OTHER_LABEL = "<other>";

    static String mode;
    static File delftPath;
    static String sitePackages;
    static File modelPath;
    static List<String[]> models = new ArrayList<>();
    static String inputFile;
    static String calls = "one-call";
    static int repeat = 1;
    static boolean printLabels = true;
    static boolean markStderr = false;
    static int runtimeMaxSequenceLength = -1;
    static int runtimeBatchSize = -1;
    static int callCount = 0;

    static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    static final List<String> violations = new ArrayList<>();
    static Jep jep;

    public static void main(String[] args) throws Exception {
        parse(args);
        String data = new String(Files.readAllBytes(Paths.get(inputFile)), StandardCharsets.UTF_8);
        List<String> sequences = splitSequences(data);
        int tokens = 0;
        for (String s : sequences)
            tokens += s.split("\n").length;

        // GROBID: JEPThreadPool's single executor thread owns the interpreter and runs every call
        ExecutorService executor = Executors.newSingleThreadExecutor();
        int code = 0;
        try {
            long t0 = System.nanoTime();
            run(executor, () -> { jep = createJEPInstance(); return null; });
            timing("startup", t0, -1);

            for (String[] model : models) {
                String name = model[0], architecture = model[1];
                // DeLFTModel: modelName = model.getModelName().replace("-", "_")
                String variable = pythonVariable(name, architecture);
                String fullModelName = name + "-" + architecture;
                long t1 = System.nanoTime();
                run(executor, () -> { initModel(variable, fullModelName); return null; });
                timing("load " + fullModelName, t1, -1);

                if (printLabels)
                    OUT.println("# model " + fullModelName);
                boolean printed = false;
                for (String kind : calls.equals("both") ? new String[] {"per-sequence", "one-call"}
                                                        : new String[] {calls}) {
                    for (int pass = 0; pass < repeat; pass++) {
                        boolean print = printLabels && !printed;
                        printed = true;
                        long t2 = System.nanoTime();
                        if (kind.equals("per-sequence")) {
                            for (String sequence : sequences) {
                                mark();
                                String labelled = run(executor, () -> label(variable, sequence + "\n", architecture));
                                emit(labelled, sequence + "\n", print);
                            }
                        } else {
                            mark();
                            String labelled = run(executor, () -> label(variable, data, architecture));
                            emit(labelled, data, print);
                        }
                        timing("tag " + fullModelName + " " + kind + " pass" + pass + " calls="
                               + (kind.equals("per-sequence") ? sequences.size() : 1), t2, tokens);
                    }
                }
            }
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            System.err.println("Python call failed through JEP: " + cause);
            cause.printStackTrace(System.err);
            code = 2;
        }
        OUT.flush();
        for (String v : violations)
            System.err.println("HARNESS VIOLATION: " + v);
        if (code == 0 && !violations.isEmpty())
            code = 3;
        System.err.flush();
        // GROBID 0.8 never closes its interpreters; the process ends with the JVM
        Runtime.getRuntime().halt(code);
    }

    static String pythonVariable(String name, String architecture) {
        String variable = name.replace("-", "_");
        for (String[] other : models)
            if (other[0].equals(name) && !other[1].equals(architecture))
                return variable + "_" + architecture;  // two architectures of one model in one run
        return variable;
    }

    /** With --mark-stderr: "# harness call N" on stderr before each label() call (diagnosis only). */
    static void mark() {
        if (markStderr) {
            System.err.println("# harness call " + (callCount++));
            System.err.flush();
        }
    }

    static <T> T run(ExecutorService executor, Callable<T> task) throws Exception {
        return executor.submit(task).get();
    }

    // ---- JEPThreadPool ----------------------------------------------------------------------

    static JepConfig getJepConfig() {
        JepConfig config = new JepConfig();
        config.addIncludePaths(delftPath.getAbsolutePath());
        config.redirectStdout(System.out);
        config.redirectStdErr(System.err);
        if (sitePackages != null)
            config.addIncludePaths(sitePackages);
        config.setClassLoader(Thread.currentThread().getContextClassLoader());
        return config;
    }

    static Jep createJEPInstance() throws JepException {
        JepConfig config = getJepConfig();
        Jep jep;
        if (mode.equals("sub")) {
            jep = new SubInterpreter(config);
        } else {
            try {
                SharedInterpreter.setConfig(config);
            } catch (Exception e) {
                // "JEP interpreter already initialized"
            }
            jep = new SharedInterpreter();
        }
        jep.eval("import os");
        if (mode.equals("sub")) {
            jep.eval("import numpy as np");
            jep.eval("import keras.backend as K");
        }
        jep.eval("os.chdir('" + delftPath.getAbsolutePath() + "')");
        jep.eval("from delft.utilities.Embeddings import Embeddings");
        jep.eval("import delft.sequenceLabelling");
        jep.eval("from delft.sequenceLabelling import Sequence");
        jep.eval("from delft.sequenceLabelling.reader import load_data_and_labels_crf_file");
        jep.eval("from delft.sequenceLabelling.reader import load_data_crf_string");
        jep.eval("from sklearn.model_selection import train_test_split");
        return jep;
    }

    // ---- DeLFTModel -------------------------------------------------------------------------

    static void initModel(String modelName, String fullModelName) throws JepException {
        jep.eval(modelName + " = Sequence('" + fullModelName + "')");
        jep.eval(modelName + ".load(dir_path='" + modelPath.getAbsolutePath() + "')");
        // grobidOrg/grobid's runtime overrides (grobid.yaml), set after load when configured
        if (runtimeMaxSequenceLength != -1)
            jep.eval(modelName + ".model_config.max_sequence_length=" + runtimeMaxSequenceLength);
        if (runtimeBatchSize != -1)
            jep.eval(modelName + ".model_config.batch_size=" + runtimeBatchSize);
    }

    @SuppressWarnings("unchecked")
    static String label(String modelName, String data, String architecture) throws JepException, IOException {
        StringBuilder labelledData = new StringBuilder();
        try {
            jep.set("input", data);
            jep.eval("x_all, f_all = load_data_crf_string(input)");
            Object objectResults;
            if (architecture.contains("FEATURE")) {
                objectResults = jep.getValue(modelName + ".tag(x_all, None, features=f_all)");
            } else {
                objectResults = jep.getValue(modelName + ".tag(x_all, None)");
            }
            checkShape(objectResults);

            // inject back the labels, exactly as DeLFTModel.LabelTask
            List<List<List<String>>> results = (List<List<List<String>>>) objectResults;
            BufferedReader bufReader = new BufferedReader(new StringReader(data));
            String inputLine;
            int i = 0; // sentence index
            int j = 0; // word index in the sentence
            if (results != null && results.size() > 0) {
                List<List<String>> result = results.get(0);
                while ((inputLine = bufReader.readLine()) != null) {
                    inputLine = inputLine.trim();
                    if (inputLine.isBlank() && j != 0) {
                        j = 0;
                        i++;
                        if (i == results.size())
                            break;
                        result = results.get(i);
                        continue;
                    }
                    if (inputLine.length() == 0) {
                        labelledData.append("\n");
                        continue;
                    }
                    labelledData.append(inputLine);
                    labelledData.append(" ");
                    if (j >= result.size()) {
                        labelledData.append(OTHER_LABEL);
                        violations.add("sequence " + i + " token " + j + ": no pair (GROBID writes "
                                       + OTHER_LABEL + ")");
                    } else {
                        List<String> pair = result.get(j);
                        // first is the token, second is the label (DeLFT format)
                        String token = pair.get(0);
                        String label = pair.get(1);
                        String inputToken = inputLine.split("\\s+")[0];
                        if (!token.equals(inputToken))
                            violations.add("sequence " + i + " token " + j + ": pair token " + token
                                           + " != input token " + inputToken);
                        labelledData.append(delft2grobidLabel(label));
                    }
                    labelledData.append("\n");
                    j++;
                }
                if (i < results.size() - 1)
                    violations.add(results.size() + " results for " + (i + 1) + " input sequences");
            } else {
                violations.add("empty result");
            }
        } finally {
            jep.eval("del input");
            jep.eval("del x_all");
            jep.eval("del f_all");
        }
        // DeLFTModel.label: GROBID expects tabs as feature separators
        return labelledData.toString().replaceAll(" ", "\t");
    }

    static String delft2grobidLabel(String label) {
        if (label.equals(IOB_OTHER_LABEL)) {
            label = OTHER_LABEL;
        } else if (label.startsWith(IOB_START_ENTITY_LABEL_PREFIX)) {
            label = label.replace(IOB_START_ENTITY_LABEL_PREFIX, GROBID_START_ENTITY_LABEL_PREFIX);
        } else if (label.startsWith(IOB_INSIDE_LABEL_PREFIX)) {
            label = label.replace(IOB_INSIDE_LABEL_PREFIX, GROBID_INSIDE_ENTITY_LABEL_PREFIX);
        }
        return label;
    }

    /** What the unchecked cast to List<List<List<String>>> silently assumes, checked. */
    static void checkShape(Object results) {
        if (!(results instanceof List)) {
            violations.add("tag() returned " + describe(results) + ", not a java.util.List");
            return;
        }
        int i = 0;
        for (Object sequence : (List<?>) results) {
            if (!(sequence instanceof List)) {
                violations.add("result " + i + " is " + describe(sequence) + ", not a List");
            } else {
                int j = 0;
                for (Object pair : (List<?>) sequence) {
                    if (!(pair instanceof List) || ((List<?>) pair).size() != 2) {
                        violations.add("result " + i + " pair " + j + " is " + describe(pair)
                                       + ", not a 2-element List");
                    } else {
                        for (Object element : (List<?>) pair)
                            if (!(element instanceof String))
                                violations.add("result " + i + " pair " + j + " holds " + describe(element)
                                               + ", not a String");
                    }
                    j++;
                }
            }
            i++;
        }
    }

    static String describe(Object o) {
        return o == null ? "null" : o.getClass().getName() + " " + o;
    }

    // ---- output -----------------------------------------------------------------------------

    /**
     * One "token<TAB>label" line per labelled input line, a blank line after each input sequence.
     * DeLFTModel's string has no sequence separators (a blank input line after a token is consumed,
     * not copied), so the input's sequences give the boundaries.
     */
    static void emit(String labelled, String data, boolean print) {
        List<String> lines = new ArrayList<>();
        for (String line : labelled.split("\n"))
            if (!line.isEmpty())
                lines.add(line);
        int k = 0;
        for (String sequence : splitSequences(data)) {
            for (String inputLine : sequence.split("\n")) {
                if (k >= lines.size()) {
                    violations.add("input token " + inputLine.split("\\s+")[0] + " has no labelled line");
                    continue;
                }
                String[] columns = lines.get(k++).split("\t");
                if (print)
                    OUT.println(columns[0] + "\t" + columns[columns.length - 1]);
            }
            if (print)
                OUT.println();
        }
        if (k != lines.size())
            violations.add((lines.size() - k) + " labelled lines more than input tokens");
    }

    static void timing(String key, long start, int tokens) {
        double seconds = (System.nanoTime() - start) / 1e9;
        OUT.println(String.format("# timing %s %.4f%s", key.replace(' ', '|'), seconds,
                                  tokens >= 0 ? " " + tokens : ""));
        OUT.flush();
    }

    static List<String> splitSequences(String data) {
        List<String> sequences = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        for (String line : data.split("\n")) {
            if (line.trim().isEmpty()) {
                if (current.length() > 0)
                    sequences.add(current.toString());
                current.setLength(0);
            } else {
                if (current.length() > 0)
                    current.append("\n");
                current.append(line.trim());
            }
        }
        if (current.length() > 0)
            sequences.add(current.toString());
        return sequences;
    }

    static void parse(String[] args) {
        for (int k = 0; k < args.length; k++) {
            switch (args[k]) {
                case "--mode": mode = args[++k]; break;
                case "--delft": delftPath = new File(args[++k]); break;
                case "--site-packages": sitePackages = args[++k]; break;
                case "--models": modelPath = new File(args[++k]); break;
                case "--model": {
                    String spec = args[++k];
                    int colon = spec.lastIndexOf(':');
                    if (colon < 0)
                        usage("--model takes NAME:ARCHITECTURE, got " + spec);
                    models.add(new String[] {spec.substring(0, colon), spec.substring(colon + 1)});
                    break;
                }
                case "--input": inputFile = args[++k]; break;
                case "--per-sequence": calls = "per-sequence"; break;
                case "--calls": calls = args[++k]; break;
                case "--repeat": repeat = Integer.parseInt(args[++k]); break;
                case "--no-labels": printLabels = false; break;
                case "--mark-stderr": markStderr = true; break;
                case "--max-sequence-length": runtimeMaxSequenceLength = Integer.parseInt(args[++k]); break;
                case "--batch-size": runtimeBatchSize = Integer.parseInt(args[++k]); break;
                default: usage("unknown argument " + args[k]);
            }
        }
        if (!(calls.equals("one-call") || calls.equals("per-sequence") || calls.equals("both")))
            usage("--calls one-call|per-sequence|both");
        if (mode == null || !(mode.equals("sub") || mode.equals("shared")))
            usage("--mode sub|shared is required");
        if (delftPath == null || modelPath == null || inputFile == null || models.isEmpty())
            usage("--delft, --models, --model and --input are required");
    }

    static void usage(String message) {
        System.err.println("GrobidLikeClient: " + message);
        System.exit(64);
    }
}
