package dev.exactlyonce.console;

import dev.exactlyonce.deadletters.DeadLetterReplay;
import dev.exactlyonce.deadletters.DeadLetterReplay.Action;
import dev.exactlyonce.deadletters.DeadLetterReplay.Selection;
import java.io.UncheckedIOException;
import java.net.URI;
import java.security.Principal;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import org.jspecify.annotations.Nullable;
import org.springframework.security.core.Authentication;
import org.springframework.stereotype.Controller;
import org.springframework.ui.Model;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.client.RestClientException;
import org.springframework.web.servlet.mvc.support.RedirectAttributes;

/**
 * The console's pages: the overview, the dead letters (replayed or discarded), an event looked up, the parked outbox
 * rows (released or skipped), and the audit log.
 */
@Controller
class ConsoleController {

    private final ServiceEndpoints services;

    private final BrokerDeadLetters deadLetters;

    private final DeadLetterActions deadLetterActions;

    private final AuditLog audit;

    ConsoleController(
            ServiceEndpoints services,
            BrokerDeadLetters deadLetters,
            DeadLetterActions deadLetterActions,
            AuditLog audit) {
        this.services = services;
        this.deadLetters = deadLetters;
        this.deadLetterActions = deadLetterActions;
        this.audit = audit;
    }

    @GetMapping("/")
    String overview(Model model) {
        model.addAttribute("instances", this.services.instances());
        model.addAttribute("now", Instant.now());
        return "overview";
    }

    @GetMapping("/events")
    String lookup(@RequestParam(name = "id", required = false) @Nullable String id, Model model) {
        model.addAttribute("id", id);
        if (id == null || id.isBlank()) {
            return "events";
        }
        UUID eventId;
        try {
            eventId = UUID.fromString(id.strip());
        } catch (IllegalArgumentException ex) {
            model.addAttribute(
                    "error", "Not an event id: an event id is a UUID, such as 01938a52-7c1e-7d3a-9f3e-2b5c8d1e4f60");
            return "events";
        }
        model.addAttribute("eventId", eventId);
        model.addAttribute("lookups", this.services.lookup(eventId));
        return "events";
    }

    @GetMapping("/parked")
    String parked(Model model, Authentication user) {
        ServiceEndpoints.ParkedRows parked = this.services.parked();
        model.addAttribute("parked", parked.rows());
        Map<URI, String> instances = new LinkedHashMap<>();
        parked.rows().forEach(row -> instances.putIfAbsent(row.url(), row.service()));
        model.addAttribute("parkedInstances", instances);
        model.addAttribute("unreachable", parked.unreachable());
        model.addAttribute("operator", isOperator(user));
        return "parked";
    }

    private static boolean isOperator(Authentication user) {
        return user.getAuthorities().stream()
                .anyMatch(authority -> authority.getAuthority().equals("ROLE_OPERATOR"));
    }

    /**
     * Releases (tried again) or skips (never published) parked rows of one instance: one row, a key's rows, or all of
     * them.
     */
    @PostMapping("/parked/{action:release|skip}")
    String act(
            @PathVariable String action,
            @RequestParam URI instance,
            @RequestParam(required = false) @Nullable UUID id,
            @RequestParam(required = false) @Nullable String key,
            @RequestParam(defaultValue = "false") boolean all,
            Principal user,
            RedirectAttributes flash) {
        String service = this.services.serviceAt(instance).orElse(null);
        if (service == null) {
            flash.addFlashAttribute("error", "No service of the console's settings answers at " + instance);
            return "redirect:/parked";
        }
        if ((id != null ? 1 : 0) + (key != null ? 1 : 0) + (all ? 1 : 0) != 1) {
            flash.addFlashAttribute("error", "Name one row, one key, or all the rows of an instance");
            return "redirect:/parked";
        }
        String target = "%s %s outbox %s"
                .formatted(service, instance, id != null ? "row " + id : key != null ? "key " + key : "all rows");
        ServiceEndpoints.Acted acted;
        if (id != null) {
            try {
                acted = new ServiceEndpoints.Acted(this.services.act(instance, id, action) ? 1 : 0, 0, null);
            } catch (RestClientException ex) {
                acted = new ServiceEndpoints.Acted(0, -1, ex);
            }
        } else {
            acted = this.services.actOnEach(instance, action, key);
        }
        if (acted.failure() != null) {
            audit(user, action + (acted.applied() > 0 ? " failed part-way" : " failed"), target, acted.applied());
            flash.addFlashAttribute(
                    "error",
                    ("%s of %s stopped after %d row(s) (%s): is the service's outbox endpoint writable"
                                    + " (management.endpoint.outbox.access: unrestricted)?")
                            .formatted(
                                    action,
                                    target,
                                    acted.applied(),
                                    acted.failure().getMessage()));
            return "redirect:/parked";
        }
        String auditFailure = audit(user, action, target, acted.applied());
        if (auditFailure != null) {
            flash.addFlashAttribute("error", "%s of %s was done: %s".formatted(action, target, auditFailure));
            return "redirect:/parked";
        }
        String done = action.equals("release") ? "Released" : "Skipped";
        String left = acted.stillParked() > 0
                ? "; %d still parked (parked again meanwhile, or more than the endpoint lists): act again"
                        .formatted(acted.stillParked())
                : "";
        flash.addFlashAttribute(
                "message",
                id == null
                        ? "%s %d parked row(s) of %s (%s)%s"
                                .formatted(done, acted.applied(), service, key != null ? "key " + key : "all", left)
                        : acted.applied() == 1
                                ? "%s: outbox row %s of %s".formatted(done, id, service)
                                : "Outbox row %s of %s was no longer parked: nothing done".formatted(id, service));
        return "redirect:/parked";
    }

    /** Appends the action to the audit log: {@code null} once it is written, else why it could not be. */
    private @Nullable String audit(Principal user, String action, String target, int count) {
        try {
            this.audit.append(new AuditLog.Entry(Instant.now(), user.getName(), action, target, count));
            return null;
        } catch (UncheckedIOException ex) {
            return "the audit log could not be written: " + ex.getMessage();
        }
    }

    /**
     * Replays or discards dead letters of a queue: those of the event ids ticked, else the whole group of the cause. A
     * discard first shows what it would take, to be confirmed, and then takes that many at most; a replay reports what
     * happened to each message. One that fails part-way says how far it went, in the page and the audit log.
     */
    @PostMapping("/dead-letters/{action:replay|discard}")
    String deadLetters(
            @PathVariable String action,
            @RequestParam String queue,
            @RequestParam(name = "eventId", required = false) @Nullable List<String> eventIds,
            @RequestParam(required = false) @Nullable String cause,
            @RequestParam(defaultValue = "false") boolean confirmed,
            @RequestParam(required = false) @Nullable Integer limit,
            Principal user,
            Model model,
            RedirectAttributes flash) {
        Selection selection;
        try {
            selection = DeadLetterActions.selection(eventIds != null ? eventIds : List.of(), cause);
        } catch (IllegalArgumentException ex) {
            selection = null;
        }
        if (selection == null || !queue.endsWith(".dlq")) {
            flash.addFlashAttribute("error", "Nothing selected: tick messages, or act on a whole group");
            return "redirect:/dead-letters";
        }
        String serviceQueue = queue.substring(0, queue.length() - ".dlq".length());
        boolean discard = action.equals("discard");
        boolean preview = discard && !confirmed;
        // A confirmed discard takes at most what its preview showed: what came after it is kept.
        DeadLetterActions.Done done = this.deadLetterActions.run(
                serviceQueue,
                preview ? Action.LIST : discard ? Action.DISCARD : Action.REPLAY,
                selection,
                discard && confirmed && limit != null ? limit : Integer.MAX_VALUE);
        DeadLetterReplay.Result result = done.result();
        if (result == null) {
            Exception failure = Objects.requireNonNull(done.failure());
            // The replay's own refusals (a queue or exchange missing, a route unbound) say what to do; others, why.
            String why =
                    failure instanceof IllegalStateException ? failure.getMessage() : ServiceEndpoints.reason(failure);
            if (!preview) {
                audit(
                        user,
                        action + (done.done() > 0 ? " failed part-way" : " failed"),
                        queue + " " + selection,
                        done.done());
            }
            flash.addFlashAttribute(
                    "error",
                    ("%s of %s in %s stopped after %d message(s): %s. The others are where they were: act again once"
                                    + " the cause is mended")
                            .formatted(action, selection, queue, done.done(), why));
            flash.addFlashAttribute("handled", done.handled());
            return "redirect:/dead-letters";
        }
        if (preview) {
            model.addAttribute("queue", queue);
            model.addAttribute("cause", eventIds == null || eventIds.isEmpty() ? cause : null);
            model.addAttribute("eventIds", eventIds != null ? eventIds : List.of());
            model.addAttribute("handled", done.handled());
            model.addAttribute("selected", result.selected());
            return "confirm-discard";
        }
        String auditFailure = audit(user, action, queue + " " + selection, done.done());
        if (auditFailure != null) {
            flash.addFlashAttribute(
                    "error", "%s of %s in %s was done: %s".formatted(action, selection, queue, auditFailure));
        }
        String unexamined = result.unexamined() == 0
                ? ""
                : "; %d were held by another reader meanwhile: act again for them".formatted(result.unexamined());
        flash.addFlashAttribute(
                "message",
                (discard
                                ? "Discarded %d message(s) from %s".formatted(done.done(), queue)
                                : "Replayed %d message(s) from %s; %d refused and %d skipped, left there (below, each one)"
                                        .formatted(done.done(), queue, result.refused(), result.skipped()))
                        + unexamined);
        flash.addFlashAttribute("handled", done.handled());
        return "redirect:/dead-letters";
    }

    @GetMapping("/dead-letters")
    String deadLetters(Model model, Authentication user) {
        model.addAttribute("operator", isOperator(user));
        model.addAttribute("acts", this.deadLetterActions.configured());
        model.addAttribute("configured", this.deadLetters.configured());
        try {
            model.addAttribute("queues", this.deadLetters.queues(this.services.deadLetteredAt()));
        } catch (RestClientException ex) {
            model.addAttribute("queues", List.of());
            model.addAttribute("error", "RabbitMQ's management API did not answer: " + ServiceEndpoints.reason(ex));
        }
        model.addAttribute("read", BrokerDeadLetters.READ);
        return "dead-letters";
    }

    @GetMapping("/audit")
    String audit(Model model) {
        model.addAttribute("entries", this.audit.latest());
        return "audit";
    }
}
