import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import jep.Jep;
import jep.JepConfig;
import jep.SharedInterpreter;

/**
 * A stand-in for GROBID's classifier client (org.grobid.core.jni.JEPThreadPoolClassifier +
 * DeLFTClassifierModel), used by tests/test_jep_classifier.py: its interpreter (a
 * SharedInterpreter, JepConfig include paths = the delft folder and the venv's site-packages,
 * stdout/stderr redirected), its start-up statements, its model initialisation
 * ("NAME = Classifier('NAME_ARCH', 'architecture=ARCH')", then ".load(dir_path=...)") and its
 * classification call (the texts set as a Java list made a Python list, predict(input, 'json',
 * use_main_thread_only=True), the result read back as json.dumps(..., sort_keys=True, indent=4,
 * ensure_ascii=False)), every call on one executor thread that owns the interpreter.
 *
 * Usage:
 *   java -cp jep.jar:DIR -Djava.library.path=JEP_DIR GrobidLikeClassifier --delft DELFT_DIR
 *        --site-packages SITE_PACKAGES --models MODELS_DIR --model NAME:ARCHITECTURE
 *        --input TEXTS_FILE [--batch-size N]
 *
 * TEXTS_FILE holds one text per line. --batch-size is set on the model's config after load, as a
 * GROBID configuration may. stdout, and only this: the JSON string GROBID receives. A Python
 * exception ends in exit code 2.
 */
public class GrobidLikeClassifier {

    static File delftPath;
    static String sitePackages;
    static File modelPath;
    static String name;
    static String architecture;
    static String inputFile;
    static int batchSize = -1;
    static Jep jep;

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--delft": delftPath = new File(args[i + 1]); break;
                case "--site-packages": sitePackages = args[i + 1]; break;
                case "--models": modelPath = new File(args[i + 1]); break;
                case "--model":
                    String[] parts = args[i + 1].split(":");
                    name = parts[0];
                    architecture = parts[1];
                    break;
                case "--input": inputFile = args[i + 1]; break;
                case "--batch-size": batchSize = Integer.parseInt(args[i + 1]); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        List<String> texts = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(inputFile), StandardCharsets.UTF_8))
            if (!line.isBlank())
                texts.add(line);

        ExecutorService executor = Executors.newSingleThreadExecutor();
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try {
            String result = executor.submit(() -> {
                jep = createJEPInstance();
                // DeLFTClassifierModel.InitModel
                jep.eval(name + " = Classifier('" + name + "_" + architecture + "', 'architecture="
                         + architecture + "')");
                jep.eval(name + ".load(dir_path='" + modelPath.getAbsolutePath() + "')");
                if (batchSize > 0)
                    jep.eval(name + ".config.batch_size = " + batchSize);
                // DeLFTClassifierModel.ClassificationTask
                jep.set("input", texts);
                jep.eval("input = list(input)");
                jep.eval("jsondict = " + name + ".predict(input, 'json', use_main_thread_only=True)");
                String json = (String) jep.getValue(
                    "json.dumps(jsondict, sort_keys=True, indent=4, ensure_ascii=False)");
                jep.eval("del jsondict");
                jep.eval("del input");
                jep.eval("del " + name);  // CloseModel
                return json;
            }).get();
            out.println(result);
        } catch (Exception e) {
            System.err.println("Python call failed through JEP: " + e.getCause());
            System.exit(2);
        } finally {
            executor.submit(() -> { jep.close(); return null; }).get();
            executor.shutdown();
        }
    }

    // JEPThreadPoolClassifier.createJEPInstance and initializeJepInstance
    static Jep createJEPInstance() throws Exception {
        JepConfig config = new JepConfig();
        config.addIncludePaths(delftPath.getAbsolutePath());
        config.redirectStdout(System.out);
        config.redirectStdErr(System.err);
        config.addIncludePaths(sitePackages);
        config.setClassLoader(Thread.currentThread().getContextClassLoader());
        SharedInterpreter.setConfig(config);
        Jep interpreter = new SharedInterpreter();
        interpreter.eval("import os");
        interpreter.eval("import json");
        interpreter.eval("os.chdir('" + delftPath.getAbsolutePath() + "')");
        interpreter.eval("from delft.utilities.Embeddings import Embeddings");
        interpreter.eval("import delft.textClassification");
        interpreter.eval("from delft.textClassification import Classifier");
        return interpreter;
    }
}
